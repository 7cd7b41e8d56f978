// Package runner assembles the pipeline from a validated config (budget,
// storage, sink, source) and runs it until a graceful stop or a fatal error.
// It holds no logic of its own beyond the order of startup and shutdown.
package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/verify"
)

// Options are hooks for callers that watch a run (the demo, tests).
type Options struct {
	// OnStart is called once the pipeline is built, with a way to read its
	// progress.
	OnStart func(p *Progress)
	// SetGoMemLimit applies the plan's GOMEMLIMIT to the process. The run
	// command sets it; tests that run several pipelines in one process don't.
	SetGoMemLimit bool
	// StorageFaults slow or stall storage (tests, bench).
	StorageFaults *storage.Faults
}

// Progress reads counters of a running pipeline. Safe for concurrent use.
type Progress struct {
	Plan   budget.Plan
	sink   *sink.Sink
	source *source.Source
	budget *budget.Budget
}

// Sink returns the sink's counters.
func (p *Progress) Sink() sink.Stats { return p.sink.Stats() }

// Source returns the source's counters.
func (p *Progress) Source() source.Stats { return p.source.Stats() }

// Budget returns the accountant's view.
func (p *Progress) Budget() budget.Snapshot { return p.budget.Snapshot() }

// MemoryPlan resolves backpressure.memory_limit into a plan.
func MemoryPlan(bp config.Backpressure) (budget.Plan, string, error) {
	limit, auto, err := bp.MemoryLimitBytes()
	if err != nil {
		return budget.Plan{}, "", err
	}
	where := "backpressure.memory_limit"
	if auto {
		if n, file, ok := budget.DetectLimit("/"); ok {
			limit, where = n, "cgroup "+file
		} else {
			limit, where = budget.DefaultMemoryLimit, "default (no cgroup limit found)"
		}
	}
	p, err := budget.NewPlan(limit)
	return p, where, err
}

// Run consumes until ctx ends, then stops gracefully within
// cfg.Shutdown.Timeout: open files are finished, uploaded and committed.
// It returns nil after a clean stop.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, opts Options) error {
	plan, where, err := MemoryPlan(cfg.Backpressure)
	if err != nil {
		return err
	}
	if opts.SetGoMemLimit {
		debug.SetMemoryLimit(plan.GoLimit)
	}
	log.Info("memory plan", "from", where, "plan", plan.String())

	tmpl, err := naming.Parse(cfg.File.NameTemplate)
	if err != nil {
		return fmt.Errorf("file.name_template: %w", err)
	}
	for _, w := range memoryWarnings(cfg, plan, where) {
		log.Warn(w)
	}
	b := budget.New(plan.Data, cfg.Backpressure.MaxBufferedRecords)
	b.Acquire(budget.FetchBuffers, plan.Reserved)
	bucket, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{
		PartSize:          int64(cfg.Storage.PartSize),
		UploadConcurrency: cfg.Storage.UploadConcurrency,
		Faults:            opts.StorageFaults,
		Retry:             storage.Retry{MaxAttempts: cfg.Storage.MaxRetries + 1},
		Account: func(delta int64) {
			if delta >= 0 {
				b.Acquire(budget.QueuedChunks, delta)
			} else {
				b.Release(budget.QueuedChunks, -delta)
			}
		},
	})
	if err != nil {
		return err
	}
	defer bucket.Close()
	// Before the consumer exists, so nothing is fetched or committed: a
	// missing bucket or refused credentials stop startup with what to fix,
	// rather than surfacing at the first upload.
	pf, err := bucket.Preflight(ctx, cfg.Storage.Prefix)
	if err != nil && ctx.Err() != nil {
		// Stopped during the check: nothing was consumed, so nothing to finish.
		log.Info("stopped cleanly before consuming")
		return nil
	}
	if err != nil {
		return err
	}
	if pf.Leftover != nil {
		log.Warn("storage preflight could not delete its probe object; it is harmless (no file name matches it) and may be deleted by hand",
			"key", pf.Probe, "err", pf.Leftover)
	}
	fcfg := cfg.Format
	// Probe the chain once so a format that can't be built fails at start,
	// not on the first record.
	if _, err := format.NewEncoder(fcfg, io.Discard); err != nil {
		return fmt.Errorf("format: %w", err)
	}
	scfg := sink.Config{
		Template:     tmpl,
		Prefix:       cfg.Storage.Prefix,
		Extension:    format.Extension(fcfg),
		MaxRecords:   cfg.File.MaxRecords,
		MaxBytes:     int64(cfg.File.MaxBytes),
		MaxAge:       cfg.File.MaxAge,
		MaxOpenFiles: cfg.Backpressure.MaxOpenFiles,
		NewEncoder: func(w io.Writer) (sink.Encoder, error) {
			return format.NewEncoder(fcfg, w)
		},
		NewCompressor: func(w io.Writer) (io.WriteCloser, error) {
			return format.NewCompressor(fcfg.Compression, w)
		},
		CompressorMemory: format.CompressorMemory(fcfg.Compression),
		ErrRecord:        format.ErrRecord,
		NullValues:       cfg.Errors.NullValues,
		Tolerance:        cfg.Errors.Tolerance,
	}
	var src *source.Source
	if cfg.Errors.DeadLetterTopic != "" {
		dlq := cfg.Errors.DeadLetterTopic
		scfg.DeadLetter = func(ctx context.Context, r *kgo.Record, cause error) error {
			return deadLetter(ctx, src.Client(), dlq, r, cause)
		}
	}
	snk := sink.New(scfg, bucket, b, log)
	defer snk.Close()

	var resume source.Resumer
	if _, exact := tmpl.PartitionPrefix("t", 0); exact && slices.Contains(fcfg.Fields, "offset") {
		resume = func(ctx context.Context, topic string, partition int32) (int64, bool, error) {
			return verify.NextOffset(ctx, bucket, tmpl, cfg.Storage.Prefix, topic, partition)
		}
	} else {
		log.Warn("records stored before a crash but not committed may be written again: resuming from storage needs a name template that lists one partition's files under one prefix and format.fields with offset")
	}
	src, err = source.New(cfg.Kafka, plan, snk, b, cfg.Shutdown.Timeout, resume, log)
	if err != nil {
		return err
	}
	defer src.Close()
	progress := &Progress{Plan: plan, sink: snk, source: src, budget: b}
	if opts.OnStart != nil {
		opts.OnStart(progress)
	}
	if cfg.Admin.Listen != "" {
		// Bind before consuming: a taken port is a startup error, not a
		// warning nobody reads while the sink runs blind.
		ln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin.listen %q: %w; choose a free host:port, or \"\" to disable the endpoint", cfg.Admin.Listen, err)
		}
		srv := admin.NewWithListener(ln, admin.SourceFunc(progress.Status), log)
		actx, stopAdmin := context.WithCancel(context.Background())
		adminDone := make(chan error, 1)
		go func() { adminDone <- srv.Run(actx) }()
		defer func() {
			stopAdmin()
			if err := <-adminDone; err != nil {
				log.Warn("admin endpoint", "err", err)
			}
		}()
	}
	log.Info("spillway running", "brokers", cfg.Kafka.Brokers, "group", cfg.Kafka.Group,
		"storage", bucket.String(), "max_open_files", snk.MaxOpenFiles())

	// hard ends only when the shutdown deadline passes, so that records
	// already polled are still written after a graceful stop begins.
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	// The deadline runs from the stop itself, not from when the consumer
	// returns: a write may still be waiting for storage then (a record
	// larger than the budget's room goes to storage piece by piece).
	defer context.AfterFunc(ctx, func() {
		t := time.NewTimer(cfg.Shutdown.Timeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelHard()
		case <-hard.Done():
		}
	})()
	tickCtx, stopTick := context.WithCancel(hard)
	tickDone := make(chan struct{})
	go func() { defer close(tickDone); snk.RunTicker(tickCtx) }()
	defer func() { stopTick(); <-tickDone }()

	runErr := src.Run(ctx, hard)
	if runErr == nil {
		runErr = snk.Err()
	}
	if runErr != nil {
		log.Error("stopping after a fatal error; offsets are committed only up to what is durable", "err", runErr)
		return runErr
	}
	log.Info("stopping: finishing open files", "deadline", cfg.Shutdown.Timeout)
	if err := src.Shutdown(hard); err != nil {
		return fmt.Errorf("graceful stop (shutdown.timeout %s): %w", cfg.Shutdown.Timeout, err)
	}
	st := snk.Stats()
	log.Info("stopped cleanly", "records", st.Records, "files", st.FilesUploaded, "bytes", st.BytesUploaded)
	return nil
}

// deadLetter produces a record that could not be written to the dead-letter
// topic, with the cause and origin in headers, and waits until it is acked.
func deadLetter(ctx context.Context, cl *kgo.Client, topic string, r *kgo.Record, cause error) error {
	dl := &kgo.Record{
		Topic: topic,
		Key:   r.Key,
		Value: r.Value,
		Headers: append(append([]kgo.RecordHeader(nil), r.Headers...),
			kgo.RecordHeader{Key: "spillway.error", Value: []byte(cause.Error())},
			kgo.RecordHeader{Key: "spillway.topic", Value: []byte(r.Topic)},
			kgo.RecordHeader{Key: "spillway.partition", Value: fmt.Append(nil, r.Partition)},
			kgo.RecordHeader{Key: "spillway.offset", Value: fmt.Append(nil, r.Offset)},
		),
	}
	return cl.ProduceSync(ctx, dl).FirstErr()
}
