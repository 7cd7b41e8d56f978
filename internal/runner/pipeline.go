package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/fieldread"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/latest"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/spool"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/tables"
)

// errStoppedEarly is a stop that came during the startup checks, before
// anything was consumed.
var errStoppedEarly = errors.New("stopped before consuming")

// pipeline is a built run: what newPipeline opened, in the order it opened
// it, and closed in reverse by close.
type pipeline struct {
	cfg  *config.Config
	log  *slog.Logger
	opts Options

	sz       sizing
	names    naming.Names
	b        *budget.Budget
	sp       *spool.Spool // nil without backpressure.spool_dir
	bucket   *storage.Bucket
	led      *ledger.Ledger    // nil with a one-object-per-key template
	cat      tables.Catalog    // nil without iceberg.table
	tab      *tables.Committer // nil without iceberg.table
	mon      *monitor
	reg      *registry.Registry // nil without schema_registry.url
	snk      writer
	maxOpen  int // the sink's cap on open files, for the log; 0 for a one-object-per-key writer
	src      *source.Source
	progress *Progress
	warnings []string // shown on /status for as long as the process runs

	storageMetrics *admin.StorageMetrics
	kafkaMetrics   *kprom.Metrics
	fetchMetrics   *fetchMetrics
	// kcl is the Kafka client from its creation, for what runs in the
	// group's callbacks (see clientHook).
	kcl clientHook

	// The Kafka client is closed within the shutdown deadline on every
	// path; the graceful path closes it itself (clientClosed). Once a
	// stop has begun, its deadline is the stop's (stopBy, UnixNano), not
	// a new one: a graceful stop that ran out of time must not get
	// shutdown.timeout again when the client is closed.
	clientClosed bool
	stopBy       atomic.Int64

	closers []func()
}

// newPipeline builds the run cfg describes, checking storage and Kafka
// before anything is consumed. On an error it closes what it opened; it
// returns errStoppedEarly when ctx ended during those checks.
func newPipeline(ctx context.Context, cfg *config.Config, log *slog.Logger, opts Options) (_ *pipeline, err error) {
	p := &pipeline{cfg: cfg, log: log, opts: opts}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.sz, err = sizingOf(cfg); err != nil {
		return nil, err
	}
	plan := p.sz.plan
	if opts.SetGoMemLimit {
		debug.SetMemoryLimit(plan.GoLimit)
	}
	if opts.SetGoMaxProcs {
		raiseProcs(cfg.Storage.URL, log)
	}
	log.Info("memory plan", "from", p.sz.where, "plan", plan.String())
	if p.names, err = cfg.Names(); err != nil {
		return nil, err
	}
	for _, w := range memoryWarnings(cfg, p.sz) {
		log.Warn(w)
	}
	p.b = budget.New(plan.Data, cfg.Backpressure.MaxBufferedRecords)
	p.b.Acquire(budget.FetchBuffers, plan.Reserved)
	if err := p.openSpool(); err != nil {
		return nil, err
	}
	p.storageMetrics = admin.NewStorageMetrics(storageScheme(cfg.Storage.URL))
	p.kafkaMetrics, p.fetchMetrics = newKafkaMetrics(), newFetchMetrics()
	p.mon = newMonitor(StallTimeout(cfg))
	if opts.Clock != nil {
		p.mon.useClock(opts.Clock)
	}
	if err := p.openStorage(ctx); err != nil {
		return nil, err
	}
	if err := p.checkKafka(ctx); err != nil {
		return nil, err
	}
	if err := p.openTables(ctx); err != nil {
		return nil, err
	}
	if err := p.buildWriter(); err != nil {
		return nil, err
	}
	if err := p.newSource(ctx); err != nil {
		return nil, err
	}
	p.progress = &Progress{Plan: plan, sink: p.snk, source: p.src, budget: p.b, mon: p.mon, version: opts.Version, reg: p.reg, warnings: p.warnings}
	if opts.OnStart != nil {
		opts.OnStart(p.progress)
	}
	if err := p.serveAdmin(); err != nil {
		return nil, err
	}
	log.Info("spillway running", "brokers", cfg.Kafka.Brokers, "group", cfg.Kafka.Group,
		"storage", p.bucket.String(), "max_open_files", p.maxOpen)
	return p, nil
}

// onClose adds f to what close runs, after whatever is added later.
func (p *pipeline) onClose(f func()) { p.closers = append(p.closers, f) }

// close closes what the pipeline opened, newest first.
func (p *pipeline) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
	p.closers = nil
}

func (p *pipeline) openSpool() error {
	sp, err := openSpool(p.cfg.Backpressure, p.b, p.sz.slots, p.log)
	if err != nil || sp == nil {
		return err
	}
	p.sp = sp
	// After the writer's Close, which is added later, so runs first.
	p.onClose(func() {
		if err := sp.Close(); err != nil {
			p.log.Warn("could not remove this process's spool directory; the next start removes it", "dir", sp.Dir(), "err", err)
		}
	})
	return nil
}

// openStorage opens the bucket and checks it before the consumer exists,
// so nothing is fetched or committed: a missing bucket or refused
// credentials stop startup with what to fix, rather than surfacing at the
// first upload.
func (p *pipeline) openStorage(ctx context.Context) error {
	cfg, b := p.cfg, p.b
	bucket, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{
		Observer:          p.storageMetrics,
		PartSize:          int64(cfg.Storage.PartSize),
		UploadConcurrency: cfg.Storage.UploadConcurrency,
		Faults:            p.opts.StorageFaults,
		Getenv:            p.opts.StorageGetenv,
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
	p.bucket = bucket
	p.onClose(func() { bucket.Close() })
	pf, err := bucket.Preflight(ctx, cfg.Storage.Prefix)
	if err != nil && ctx.Err() != nil {
		return errStoppedEarly
	}
	if err != nil {
		return err
	}
	if pf.Leftover != nil {
		p.log.Warn("storage preflight could not delete its probe object; it is harmless (no file name matches it) and may be deleted by hand",
			"key", pf.Probe, "err", pf.Leftover)
	}
	w, err := createOnlyPolicy(cfg, bucket, pf, p.names.Template.LatestPerKey(), p.log)
	if err != nil {
		return err
	}
	if w != "" {
		p.log.Warn(w)
		p.warnings = append(p.warnings, w)
	}
	return nil
}

// checkKafka runs before the consumer exists: the consumer retries a
// broker it can't reach, refused credentials or a missing topic forever
// and in silence, so a setup that can't work must be caught here.
func (p *pipeline) checkKafka(ctx context.Context) error {
	cfg := p.cfg
	kctx, cancel := context.WithTimeout(ctx, cfg.Kafka.StartupTimeout)
	kpf, err := source.Preflight(kctx, cfg.Kafka, cfg.Errors.DeadLetterTopic)
	cancel()
	if err != nil && ctx.Err() != nil {
		return errStoppedEarly
	}
	if err != nil {
		return err
	}
	if kpf.RegexListed && len(kpf.RegexMatches) == 0 {
		p.log.Warn("kafka.topic_regex matches no topic yet: nothing is consumed, and /readyz says not ready, until a topic that matches is created; the consumer keeps checking as topics are created (at each metadata refresh, every 5 minutes at most)",
			"topic_regex", cfg.Kafka.TopicRegex)
	} else if kpf.RegexListed {
		p.log.Info("kafka.topic_regex matches topics", "topic_regex", cfg.Kafka.TopicRegex, "topics", len(kpf.RegexMatches))
	}
	return nil
}

// buildWriter builds what the consumer feeds: the sink with its ledger, or
// for a one-object-per-key template, package latest.
func (p *pipeline) buildWriter() error {
	cfg, names := p.cfg, p.names
	fcfg := cfg.Format
	// Probe the chain once so a format that can't be built fails at start,
	// not on the first record.
	if _, err := formats.NewEncoder(fcfg, io.Discard); err != nil {
		return fmt.Errorf("format: %w", err)
	}
	kind := formats.Of(fcfg.Type)
	scfg := sink.Config{
		Template:     names.Template,
		EventTime:    cfg.File.TimestampSource == "event",
		Prefix:       names.Prefix,
		Extension:    names.Ext,
		MaxRecords:   cfg.File.MaxRecords,
		MaxBytes:     int64(cfg.File.MaxBytes),
		MaxAge:       cfg.File.MaxAge,
		MaxOpenFiles: cfg.Backpressure.MaxOpenFiles,
		NewEncoder: func(w io.Writer) (format.Encoder, error) {
			return formats.NewEncoder(fcfg, w)
		},
		NewBufferedEncoder: func(w io.Writer, flushBytes int64, grow func(int64)) (format.Encoder, error) {
			return formats.NewBufferedEncoder(fcfg, w, format.Memory{FlushBytes: flushBytes, Grow: grow})
		},
		FlushBytes:     p.sz.FlushBytes,
		SlotFlushBytes: p.sz.SlotFlushBytes,
		QueueBatches:   p.sz.plan.QueueBatches(),
		EncodeSlots:    p.sz.slots,
		NewCompressor: func(w io.Writer) (io.WriteCloser, error) {
			return format.NewCompressor(kind.StreamCompression(fcfg), w)
		},
		CompressorMemory: kind.FixedMemory(fcfg),
		ErrRecord:        format.ErrRecord,
		NullValues:       cfg.Errors.NullValues,
		Policy:           errpolicy.Policy{Tolerance: cfg.Errors.Tolerance, Log: p.log},
		OnClose:          p.mon.onClose,
	}
	reg, err := registry.New(cfg.SchemaRegistry, p.log)
	if err != nil {
		return err
	}
	p.reg = reg
	if reg != nil {
		scfg.Schemas = typedSchemas{formats.NewTyped(fcfg, reg)}
		if paths := names.Template.FieldPaths(); len(paths) > 0 {
			scfg.Fields = fieldread.New(reg, paths)
		}
	}
	if topic := cfg.Errors.DeadLetterTopic; topic != "" {
		// The source, whose client produces, is built after the writer.
		scfg.Policy.DeadLetter = source.DeadLetterTo(topic, p.kcl.Load)
	}
	if names.Template.LatestPerKey() {
		// Objects are replaced from the committed offset on: no ledger,
		// nothing to resume from storage.
		if p.sp != nil {
			p.log.Warn("backpressure.spool_dir is not used by a one-object-per-key template: it holds one record per key, not open files; unset it")
		}
		p.snk = latest.New(latestConfig(cfg, scfg), p.bucket, p.b, p.log)
	} else {
		p.led = ledger.New(p.bucket, cfg.Storage.Prefix)
		scfg.Ledger = p.led
		scfg.Writer = writerName(cfg)
		scfg.Deployment = Deployment(cfg, names.Ext)
		if p.sp != nil {
			scfg.Spool = p.sp
		}
		if p.tab = p.newCommitter(); p.tab != nil {
			scfg.Published = p.tab.Published
		}
		files := sink.New(scfg, sink.FromStorage(p.bucket), p.b, p.log)
		p.snk, p.maxOpen = files, files.MaxOpenFiles()
		if p.tab != nil {
			p.snk = tablesWriter{writer: files, tab: p.tab}
		}
	}
	p.onClose(p.snk.Close)
	return nil
}

// clientHook keeps the Kafka client from its creation: kgo tells its hooks
// of a new client before it starts any goroutine, whereas the group's
// first assignment, and the resumes in it (whose group check asks the
// client), can come before source.New returns and p.src is set. A crash
// test's run read p.src there while it was still nil, and panicked.
type clientHook struct{ cl atomic.Pointer[kgo.Client] }

var _ kgo.HookNewClient = (*clientHook)(nil)

func (h *clientHook) OnNewClient(cl *kgo.Client) { h.cl.Store(cl) }

// Load is the client, nil before it was made.
func (h *clientHook) Load() *kgo.Client { return h.cl.Load() }

// resumer is how partitions resume from storage: from the ledger, or
// with a one-object-per-key template (no ledger) not at all.
func (p *pipeline) resumer() source.Resumer {
	cfg, names := p.cfg, p.names
	if p.led == nil {
		return nil
	}
	return ledger.Resumer(p.led, p.bucket, names, ledger.ResumerOptions{
		ResumeOptions: ledger.ResumeOptions{
			StartFresh: cfg.Storage.TopicIDChange == "start_fresh",
			Deployment: Deployment(cfg, names.Ext),
			GroupActive: func(ctx context.Context, group string) (bool, error) {
				// It only words a warning (ledger.ResumeOptions): a group
				// coordinator that does not answer must not hold the resume.
				ctx, cancel := context.WithTimeout(ctx, groupCheckTimeout)
				defer cancel()
				cl := p.kcl.Load()
				if cl == nil {
					return false, errors.New("the Kafka client is not made yet")
				}
				return source.GroupActive(ctx, cl, group)
			},
		},
		EarlierFiles: cfg.Storage.EarlierFiles,
		Readable:     slices.Contains(cfg.Format.Fields, "offset") && formats.Of(cfg.Format.Type).JSONRecords,
		Log:          p.log,
	})
}

// newSource builds the consumer that feeds the writer, through the schema
// registry when one types records; stop is the graceful stop.
func (p *pipeline) newSource(stop context.Context) error {
	cfg := p.cfg
	var feed source.Writer = p.snk
	if p.reg != nil {
		feed = resolving{Writer: p.snk, reg: p.reg, stop: stop}
	}
	src, err := source.New(cfg.Kafka, p.sz.plan, feed, p.b, cfg.Shutdown.Timeout, p.resumer(), cfg.CheckTopic, p.log, kgo.WithHooks(p.kafkaMetrics, p.fetchMetrics, &p.kcl))
	if err != nil {
		return err
	}
	p.src = src
	p.onClose(func() {
		if p.clientClosed {
			return
		}
		deadline := time.Now().Add(cfg.Shutdown.Timeout)
		if n := p.stopBy.Load(); n != 0 {
			deadline = time.Unix(0, n)
		}
		cctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := src.Close(cctx); err != nil {
			p.log.Warn("exiting without a clean close of the Kafka client", "err", err)
		}
	})
	return nil
}

// serveAdmin binds admin.listen before consuming: a taken port is a
// startup error, not a warning nobody reads while the sink runs blind.
func (p *pipeline) serveAdmin() error {
	cfg := p.cfg
	if cfg.Admin.Listen == "" {
		return nil
	}
	access, err := admin.LoadAccess(cfg.Admin.Token, cfg.Admin.TokenFile, cfg.Admin.TLS.CertFile, cfg.Admin.TLS.KeyFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen %q: %w; choose a free host:port, or \"\" to disable the endpoint", cfg.Admin.Listen, err)
	}
	srv := admin.NewWithListener(ln, admin.SourceFunc(p.progress.Status), p.log, p.storageMetrics, p.kafkaMetrics, p.fetchMetrics).WithAccess(access)
	actx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(actx) }()
	p.onClose(func() {
		stop()
		if err := <-done; err != nil {
			p.log.Warn("admin endpoint", "err", err)
		}
	})
	return nil
}

// run consumes until ctx ends, then stops gracefully within
// shutdown.timeout, or returns the first fatal error.
func (p *pipeline) run(ctx context.Context) error {
	cfg, log, src, snk := p.cfg, p.log, p.src, p.snk
	// hard ends only when the shutdown deadline passes, so that records
	// already polled are still written after a graceful stop begins.
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	// The deadline runs from the stop itself, not from when the consumer
	// returns: a write may still be waiting for storage then (a record
	// larger than the budget's room goes to storage piece by piece).
	defer context.AfterFunc(ctx, func() {
		p.stopBy.Store(time.Now().Add(cfg.Shutdown.Timeout).UnixNano())
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
	p.mon.look(p.progress)
	monDone := make(chan struct{})
	go func() { defer close(monDone); p.mon.run(tickCtx, p.progress) }()
	defer func() { stopTick(); <-monDone }()
	waitTables := p.runTables(tickCtx)
	defer func() { stopTick(); waitTables() }()

	runErr := src.Run(ctx, hard)
	if runErr == nil {
		runErr = snk.Err()
	}
	if runErr != nil {
		log.Error("stopping after a fatal error; offsets are committed only up to what is durable", "err", runErr)
		logLost(log, snk.Stats())
		return runErr
	}
	log.Info("stopping: finishing open files", "deadline", cfg.Shutdown.Timeout)
	if err := src.Shutdown(hard); err != nil {
		return shutdownErr(err, hard.Err() != nil, cfg.Shutdown.Timeout)
	}
	p.clientClosed = true
	if err := src.Close(hard); err != nil {
		return fmt.Errorf("graceful stop: files are stored and their offsets committed, but the Kafka client did not close within shutdown.timeout %s: %w", cfg.Shutdown.Timeout, err)
	}
	if p.tab != nil {
		// The loop stops before its last commit, which Close makes.
		stopTick()
		waitTables()
		if err := p.closeTables(hard); err != nil {
			return err
		}
	}
	st := snk.Stats()
	// Records stored, not records written: a file dropped with a revoked
	// partition is written again by its next owner and stored once.
	log.Info("stopped cleanly", "records_stored", st.Stored, "files", st.FilesUploaded, "bytes", st.BytesUploaded,
		"records_skipped", st.Skipped, "records_already_stored", st.Resumed)
	logLost(log, st)
	return nil
}
