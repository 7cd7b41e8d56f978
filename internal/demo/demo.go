// Package demo runs Spillway end to end with nothing installed: an
// in-process Kafka broker (kfake), a synthetic producer, the real pipeline
// writing to a local directory, live progress, and a final check that every
// produced record is in the output exactly once.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/audit"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/verify"
)

// Options size the demo.
type Options struct {
	Records     int
	Partitions  int
	RecordSize  int
	Rate        int // records per second; 0 = as fast as possible
	Out         string
	Compression string
	// Iceberg commits the files to an Apache Iceberg table in a SQL
	// catalog in a SQLite file under the output directory (iceberg.go).
	Iceberg bool
}

// Summary is the demo's verdict.
type Summary struct {
	Dir        string
	Produced   int64
	Stored     int64
	Files      int
	Missing    int64
	Duplicates int64
	Problems   int // what verify found besides missing and duplicated records
	Elapsed    time.Duration
}

// OK reports whether every record arrived exactly once.
func (s Summary) OK() bool {
	return s.Stored == s.Produced && s.Missing == 0 && s.Duplicates == 0 && s.Problems == 0
}

const topic = "demo-events"

// Run runs the demo, printing progress to out.
func Run(ctx context.Context, o Options, out io.Writer, log *slog.Logger) (Summary, error) {
	var sum Summary
	if o.Records <= 0 || o.Partitions <= 0 || o.RecordSize < 16 {
		return sum, errors.New("demo: --records and --partitions must be positive and --record-size at least 16")
	}
	start := time.Now()
	dir, err := filepath.Abs(filepath.Join(o.Out, "run-"+start.UTC().Format("20060102-150405")))
	if err != nil {
		return sum, err
	}
	sum.Dir = dir

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(o.Partitions), topic))
	if err != nil {
		return sum, fmt.Errorf("demo: start in-process broker: %w", err)
	}
	defer cluster.Close()

	cfg, err := demoConfig(o, dir, cluster.ListenAddrs())
	if err != nil {
		return sum, err
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return sum, err
	}
	defer prod.Close()

	fmt.Fprintf(out, "spillway demo: %d records of %d B over %d partitions -> %s\n", o.Records, o.RecordSize, o.Partitions, dir)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	w := &watcher{o: o, cfg: cfg, out: out, start: start, sum: sum, stopRun: stopRun, runDone: make(chan error, 1)}
	go func() {
		w.runDone <- runner.Run(runCtx, cfg, log, runner.Options{OnStart: w.progress.Store})
	}()
	prodErr := make(chan error, 1)
	go func() { prodErr <- produce(runCtx, prod, o, &w.produced) }()
	return w.wait(ctx, prodErr)
}

// demoConfig is the pipeline's config for the demo: the in-process broker
// at brokers, files under dir.
func demoConfig(o Options, dir string, brokers []string) (*config.Config, error) {
	cfg := config.Default()
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.Group = "spillway-demo"
	cfg.Kafka.Topics = []string{topic}
	cfg.Storage.URL = "file://" + dir
	cfg.File.MaxBytes = 16 * config.MiB
	cfg.File.MaxAge = 2 * time.Second
	cfg.File.MaxRecords = 5000
	cfg.Format.Compression = o.Compression
	cfg.Backpressure.MemoryLimit = "512MiB"
	cfg.Admin.Listen = ""
	if o.Iceberg {
		useIceberg(cfg, dir)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// watcher follows a running demo: it prints progress every second and,
// once every produced record is committed, stops the pipeline and checks
// the output.
type watcher struct {
	o        Options
	cfg      *config.Config
	out      io.Writer
	start    time.Time
	sum      Summary
	stopRun  context.CancelFunc
	runDone  chan error // the pipeline's result
	progress atomic.Pointer[runner.Progress]
	produced atomic.Int64

	lastRecs int64 // records written at lastAt, for the rates
	lastAt   time.Time
}

// wait runs until the demo is done, fails, or ctx ends. prodErr is the
// producer's result.
func (w *watcher) wait(ctx context.Context, prodErr chan error) (Summary, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	w.lastAt = w.start
	producing := true
	for {
		select {
		case err := <-w.runDone:
			return w.sum, fmt.Errorf("demo: pipeline stopped early: %w", err)
		case err := <-prodErr:
			if err != nil {
				return w.sum, fmt.Errorf("demo: produce: %w", err)
			}
			producing = false
			prodErr = nil
		case <-ctx.Done():
			w.stopRun()
			<-w.runDone
			return w.sum, ctx.Err()
		case now := <-tick.C:
			p := w.progress.Load()
			if p == nil {
				continue
			}
			committed := w.report(now, p)
			if !producing && committed >= int64(w.o.Records) {
				return w.finish(ctx)
			}
		}
	}
}

// report prints one progress line and returns the records committed.
func (w *watcher) report(now time.Time, p *runner.Progress) (committed int64) {
	st, src, b := p.Sink(), p.Source(), p.Budget()
	for _, off := range src.Committed {
		committed += off
	}
	dt := now.Sub(w.lastAt).Seconds()
	produced := w.produced.Load()
	// Once every record is written, the lag is the open files' records,
	// committed when those files close: say so, or the lines of 0 rec/s
	// meanwhile read as a stall.
	waiting := ""
	if produced > 0 && st.Records >= produced && committed < produced {
		waiting = fmt.Sprintf("  (the last files close at file.max_age, %v)", w.cfg.File.MaxAge)
	}
	// MB/s is of record values taken in; files are smaller, compressed.
	fmt.Fprintf(w.out, "  %6.1fs  produced %8d  written %8d  %8.0f rec/s  %6.1f MB/s  files %4d  budget %5.1f/%.0f MiB  lag %8d%s\n",
		now.Sub(w.start).Seconds(), produced, st.Records,
		float64(st.Records-w.lastRecs)/dt, float64(st.Records-w.lastRecs)*float64(w.o.RecordSize)/dt/1e6,
		st.FilesUploaded, float64(b.Used)/(1<<20), float64(b.Limit)/(1<<20), produced-committed, waiting)
	w.lastRecs, w.lastAt = st.Records, now
	return committed
}

// finish stops the pipeline gracefully and checks the output.
func (w *watcher) finish(ctx context.Context) (Summary, error) {
	w.stopRun()
	if err := <-w.runDone; err != nil {
		return w.sum, fmt.Errorf("demo: graceful stop: %w", err)
	}
	sum, err := check(ctx, w.sum, w.cfg, int64(w.o.Records), w.out, w.start)
	if err == nil && w.o.Iceberg {
		fmt.Fprint(w.out, icebergHint(w.cfg))
	}
	return sum, err
}

func produce(ctx context.Context, cl *kgo.Client, o Options, n *atomic.Int64) error {
	pad := strings.Repeat("x", max(0, o.RecordSize-60))
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	var interval time.Duration
	if o.Rate > 0 {
		interval = time.Second / time.Duration(o.Rate)
	}
	next := time.Now()
	for i := range o.Records {
		if ctx.Err() != nil {
			break
		}
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		r := &kgo.Record{
			Topic: topic,
			Key:   fmt.Appendf(nil, "user-%d", i%1000),
			Value: fmt.Appendf(nil, `{"id":%d,"user":"user-%d","payload":"%s"}`, i, i%1000, pad),
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			n.Add(1)
		})
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return *e
	}
	return ctx.Err()
}

// check runs verify's deep check, the one `spillway verify --deep` runs,
// and sums it up.
func check(ctx context.Context, sum Summary, cfg *config.Config, produced int64, out io.Writer, start time.Time) (Summary, error) {
	sum.Produced = produced
	b, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{})
	if err != nil {
		return sum, err
	}
	defer b.Close()
	names, err := naming.NewConfiguredNames(cfg.Storage.Prefix, cfg.File.NameTemplate, cfg.File.Extension, cfg.Format.Type, cfg.Format.Compression)
	if err != nil {
		return sum, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...))
	if err != nil {
		return sum, err
	}
	defer cl.Close()
	rep, err := verify.Run(ctx, b, kadm.NewClient(cl), cfg.Kafka.Group, cfg.Kafka.Topics, verify.Options{
		Names:   names,
		Deep:    &audit.DeepOptions{OffsetField: cfg.Format.Envelope && slices.Contains(cfg.Format.Fields, "offset")},
		NotData: cfg.IcebergNotData(),
	})
	if err != nil {
		return sum, err
	}
	committed := true
	for _, p := range rep.Partitions {
		sum.Files += int(p.Files)
		sum.Duplicates += p.Duplicates
		if p.Deep != nil {
			sum.Stored += p.Deep.Records
		}
		// Every offset of the log in a published file: records missing
		// at the tail show here, where no commit covers them.
		sum.Missing += offsets.Ranges{{p.LogStart, p.End}}.Subtract(p.Ranges).Count()
		committed = committed && p.Committed == p.End
	}
	sum.Problems = rep.ProblemCount()
	sum.Elapsed = time.Since(start)
	fmt.Fprintf(out, "\nsummary: %d produced, %d stored in %d files over %d partitions, %d missing, %d duplicated, %.1fs\n",
		sum.Produced, sum.Stored, sum.Files, len(rep.Partitions), sum.Missing, sum.Duplicates, sum.Elapsed.Seconds())
	if sum.OK() && committed {
		fmt.Fprintf(out, "OK: every record is in %s exactly once, and the group's committed offsets equal the end offsets.\n", sum.Dir)
		return sum, nil
	}
	_ = rep.WriteText(out)
	return sum, fmt.Errorf("demo: output check failed: %d missing, %d duplicated, %d problems", sum.Missing, sum.Duplicates, sum.Problems)
}

// DefaultOut is where the demo writes, under the working directory.
func DefaultOut() string {
	if wd, err := os.Getwd(); err == nil {
		return filepath.Join(wd, "spillway-out")
	}
	return "spillway-out"
}
