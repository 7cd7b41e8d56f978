// Package runner assembles the pipeline from a validated config (budget,
// storage, sink, source) and runs it until a graceful stop or a fatal error.
// It holds no logic of its own beyond the order of startup and shutdown.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"runtime"
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
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/latest"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/spool"
	"github.com/spillway/spillway/internal/storage"
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
	// Version is the build's version, for spillway_build_info and the
	// status page.
	Version string
}

// Progress reads counters of a running pipeline. Safe for concurrent use.
type Progress struct {
	Plan    budget.Plan
	sink    writer
	source  *source.Source
	budget  *budget.Budget
	mon     *monitor
	version string
	reg     *registry.Registry // nil without schema_registry.url
	// warnings are shown on /status for as long as the process runs.
	warnings []string
}

// writer is what the runner drives: the sink, or for the one-object-per-key
// layout, package latest. Besides what the source calls (source.Writer):
type writer interface {
	source.Writer
	// Stats and OpenFiles are read by the status page and the monitor,
	// from any goroutine. A writer that holds no open files lists none.
	Stats() sink.Stats
	OpenFiles() []sink.OpenFile
	// RunTicker runs on a goroutine of its own until ctx ends, and closes
	// files that reached file.max_age (Tick).
	RunTicker(ctx context.Context)
	// Close runs once the source has returned: nothing else calls the
	// writer then.
	Close()
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
	// So that the warning about records larger than the budget's room
	// gives this format's figures.
	plan.RecordCopies = formats.Of(cfg.Format.Type).LargeRecordCopies(cfg.Format)
	if opts.SetGoMemLimit {
		debug.SetMemoryLimit(plan.GoLimit)
	}
	log.Info("memory plan", "from", where, "plan", plan.String())

	names, err := cfg.Names()
	if err != nil {
		return err
	}
	for _, w := range memoryWarnings(cfg, plan, where) {
		log.Warn(w)
	}
	b := budget.New(plan.Data, cfg.Backpressure.MaxBufferedRecords)
	b.Acquire(budget.FetchBuffers, plan.Reserved)
	sp, err := openSpool(cfg.Backpressure, b, log)
	if err != nil {
		return err
	}
	if sp != nil {
		// After the sink's Close (deferred later, so run first).
		defer func() {
			if err := sp.Close(); err != nil {
				log.Warn("could not remove this process's spool directory; the next start removes it", "dir", sp.Dir(), "err", err)
			}
		}()
	}
	storageMetrics := admin.NewStorageMetrics(storageScheme(cfg.Storage.URL))
	kafkaMetrics := newKafkaMetrics()
	mon := newMonitor(StallTimeout(cfg))
	bucket, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{
		Observer:          storageMetrics,
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
	var warnings []string
	w, err := createOnlyPolicy(cfg, bucket, pf, names.Template.LatestPerKey(), log)
	if err != nil {
		return err
	}
	if w != "" {
		log.Warn(w)
		warnings = append(warnings, w)
	}
	// Also before the consumer exists: the consumer retries a broker it
	// can't reach, refused credentials or a missing topic forever and in
	// silence, so a setup that can't work must be caught here.
	kctx, cancelK := context.WithTimeout(ctx, cfg.Kafka.StartupTimeout)
	kpf, err := source.Preflight(kctx, cfg.Kafka, cfg.Errors.DeadLetterTopic)
	cancelK()
	if err != nil && ctx.Err() != nil {
		log.Info("stopped cleanly before consuming")
		return nil
	}
	if err != nil {
		return err
	}
	if kpf.RegexListed && len(kpf.RegexMatches) == 0 {
		log.Warn("kafka.topic_regex matches no topic yet: nothing is consumed, and /readyz says not ready, until a topic that matches is created; the consumer keeps checking as topics are created (at each metadata refresh, every 5 minutes at most)",
			"topic_regex", cfg.Kafka.TopicRegex)
	} else if kpf.RegexListed {
		log.Info("kafka.topic_regex matches topics", "topic_regex", cfg.Kafka.TopicRegex, "topics", len(kpf.RegexMatches))
	}
	fcfg := cfg.Format
	// Probe the chain once so a format that can't be built fails at start,
	// not on the first record.
	if _, err := formats.NewEncoder(fcfg, io.Discard); err != nil {
		return fmt.Errorf("format: %w", err)
	}
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
		// Avro blocks and Parquet row groups are cut at half of an open
		// file's share of the budget (budget.Plan.FileShare), and in an
		// encode slot (a spooled file encoded once closed) at half of the
		// slot's (Plan.EncodeShare); the sink counts them as they grow.
		NewBufferedEncoder: func(w io.Writer, flushBytes int64, grow func(int64)) (format.Encoder, error) {
			return formats.NewBufferedEncoder(fcfg, w, format.Memory{FlushBytes: flushBytes, Grow: grow})
		},
		FlushBytes:     formats.Of(fcfg.Type).FlushBytes(plan.FileShare(cfg.Backpressure.MaxOpenFiles)),
		SlotFlushBytes: formats.Of(fcfg.Type).FlushBytes(plan.EncodeShare(encodeSlots())),
		EncodeSlots:    encodeSlots(),
		NewCompressor: func(w io.Writer) (io.WriteCloser, error) {
			return format.NewCompressor(formats.Of(fcfg.Type).StreamCompression(fcfg), w)
		},
		CompressorMemory: formats.Of(fcfg.Type).FixedMemory(fcfg),
		ErrRecord:        format.ErrRecord,
		NullValues:       cfg.Errors.NullValues,
		Policy:           errpolicy.Policy{Tolerance: cfg.Errors.Tolerance, Log: log},
	}
	reg, err := registry.New(cfg.SchemaRegistry, log)
	if err != nil {
		return err
	}
	if reg != nil {
		scfg.Schemas = typedSchemas{formats.NewTyped(fcfg, reg)}
	}
	var src *source.Source
	if cfg.Errors.DeadLetterTopic != "" {
		dlq := cfg.Errors.DeadLetterTopic
		scfg.Policy.DeadLetter = func(ctx context.Context, r *kgo.Record, cause error) error {
			return deadLetter(ctx, src.Client(), dlq, r, cause)
		}
	}
	scfg.OnClose = mon.onClose
	var snk writer
	maxOpen := 0 // files; a one-object-per-key writer holds none
	var resume source.Resumer
	if names.Template.LatestPerKey() {
		// Objects are replaced from the committed offset on: no ledger,
		// nothing to resume from storage.
		if sp != nil {
			log.Warn("backpressure.spool_dir is not used by a one-object-per-key template: it holds one record per key, not open files; unset it")
		}
		snk = latest.New(latestConfig(cfg, scfg), bucket, b, log)
	} else {
		led := ledger.New(bucket, cfg.Storage.Prefix)
		scfg.Ledger = led
		scfg.Writer = writerName(cfg)
		scfg.Deployment = Deployment(cfg, names.Ext)
		if sp != nil {
			scfg.Spool = sp
		}
		files := sink.New(scfg, sink.FromStorage(bucket), b, log)
		snk, maxOpen = files, files.MaxOpenFiles()
		resume = ledger.Resumer(led, bucket, names, ledger.ResumerOptions{
			ResumeOptions: ledger.ResumeOptions{
				StartFresh: cfg.Storage.TopicIDChange == "start_fresh",
				Deployment: Deployment(cfg, names.Ext),
				GroupActive: func(ctx context.Context, group string) (bool, error) {
					// It only words a warning (ledger.ResumeOptions): a group
					// coordinator that does not answer must not hold the resume.
					ctx, cancel := context.WithTimeout(ctx, groupCheckTimeout)
					defer cancel()
					return source.GroupActive(ctx, src.Client(), group)
				},
			},
			EarlierFiles: cfg.Storage.EarlierFiles,
			Readable:     slices.Contains(cfg.Format.Fields, "offset") && (cfg.Format.Type == "jsonl" || cfg.Format.Type == "json"),
			Log:          log,
		})
	}
	defer snk.Close()
	var feed source.Writer = snk
	if reg != nil {
		feed = resolving{Writer: snk, reg: reg, stop: ctx}
	}
	src, err = source.New(cfg.Kafka, plan, feed, b, cfg.Shutdown.Timeout, resume, cfg.CheckTopic, log, kgo.WithHooks(kafkaMetrics))
	if err != nil {
		return err
	}
	// The client is closed within the shutdown deadline on every path; the
	// graceful path closes it itself, and says so if it can't. Once a stop
	// has begun, its deadline is the stop's, not a new one: a graceful stop
	// that ran out of time must not get shutdown.timeout again here.
	clientClosed := false
	var stopBy atomic.Int64 // UnixNano of the stop's deadline, once a stop began
	defer func() {
		if clientClosed {
			return
		}
		deadline := time.Now().Add(cfg.Shutdown.Timeout)
		if n := stopBy.Load(); n != 0 {
			deadline = time.Unix(0, n)
		}
		cctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := src.Close(cctx); err != nil {
			log.Warn("exiting without a clean close of the Kafka client", "err", err)
		}
	}()
	progress := &Progress{Plan: plan, sink: snk, source: src, budget: b, mon: mon, version: opts.Version, reg: reg, warnings: warnings}
	if opts.OnStart != nil {
		opts.OnStart(progress)
	}
	if cfg.Admin.Listen != "" {
		access, err := admin.LoadAccess(cfg.Admin.Token, cfg.Admin.TokenFile, cfg.Admin.TLS.CertFile, cfg.Admin.TLS.KeyFile)
		if err != nil {
			return err
		}
		// Bind before consuming: a taken port is a startup error, not a
		// warning nobody reads while the sink runs blind.
		ln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin.listen %q: %w; choose a free host:port, or \"\" to disable the endpoint", cfg.Admin.Listen, err)
		}
		srv := admin.NewWithListener(ln, admin.SourceFunc(progress.Status), log, storageMetrics, kafkaMetrics).WithAccess(access)
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
		"storage", bucket.String(), "max_open_files", maxOpen)

	// hard ends only when the shutdown deadline passes, so that records
	// already polled are still written after a graceful stop begins.
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	// The deadline runs from the stop itself, not from when the consumer
	// returns: a write may still be waiting for storage then (a record
	// larger than the budget's room goes to storage piece by piece).
	defer context.AfterFunc(ctx, func() {
		stopBy.Store(time.Now().Add(cfg.Shutdown.Timeout).UnixNano())
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
	monDone := make(chan struct{})
	go func() { defer close(monDone); mon.run(tickCtx, progress) }()
	defer func() { stopTick(); <-monDone }()

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
	clientClosed = true
	if err := src.Close(hard); err != nil {
		return fmt.Errorf("graceful stop: files are stored and their offsets committed, but the Kafka client did not close within shutdown.timeout %s: %w", cfg.Shutdown.Timeout, err)
	}
	st := snk.Stats()
	// Records stored, not records written: a file dropped with a revoked
	// partition is written again by its next owner and stored once.
	log.Info("stopped cleanly", "records_stored", st.Stored, "files", st.FilesUploaded, "bytes", st.BytesUploaded,
		"records_skipped", st.Skipped, "records_already_stored", st.Resumed)
	logLost(log, st)
	return nil
}

// logLost makes a loss the run's last line: records the log deleted
// before they were stored are never passed in silence, not even by a run
// that stopped cleanly.
func logLost(log *slog.Logger, st sink.Stats) {
	var n int64
	for _, c := range st.Lost {
		n += c
	}
	if n > 0 {
		log.Error("records were lost: the log deleted them before Spillway stored them; the ledger records the gaps, and spillway verify names them", "offsets_lost", n, "by_cause", st.Lost)
	}
}

// shutdownErr says what a graceful stop that failed did and did not do,
// blaming shutdown.timeout only when it passed (late).
func shutdownErr(err error, late bool, timeout time.Duration) error {
	var se *source.ShutdownError
	if late {
		return fmt.Errorf("graceful stop not finished within shutdown.timeout %s (offsets are committed only up to what is stored): %w", timeout, err)
	}
	if !errors.As(err, &se) {
		return fmt.Errorf("graceful stop failed (offsets are committed only up to what is stored): %w", err)
	}
	switch {
	case se.Stored != nil:
		return fmt.Errorf("graceful stop: open files could not all be stored (offsets are committed only up to what is stored): %w", err)
	case se.Committed != nil:
		return fmt.Errorf("graceful stop: files are stored, but their offsets could not all be committed (records past the last commit are consumed again at the next start): %w", err)
	}
	return fmt.Errorf("graceful stop: files are stored and their offsets committed, but leaving the group failed (the group rebalances once the session times out): %w", err)
}

// latestConfig is the one-object-per-key writer's share of the sink's.
func latestConfig(cfg *config.Config, scfg sink.Config) latest.Config {
	return latest.Config{
		Template: scfg.Template, Prefix: scfg.Prefix, Extension: scfg.Extension,
		MaxAge: scfg.MaxAge, MaxRecords: scfg.MaxRecords, EventTime: scfg.EventTime,
		Concurrency: cfg.Storage.UploadConcurrency,
		NewEncoder: func(w io.Writer) (format.Encoder, error) {
			return formats.NewEncoder(cfg.Format, w)
		},
		NewCompressor: scfg.NewCompressor,
		Schemas:       scfg.Schemas,
		OnClose:       scfg.OnClose,
		ErrRecord:     scfg.ErrRecord,
		NullValues:    scfg.NullValues,
		Policy:        scfg.Policy,
	}
}

// Deployment is what ledger entries record of the config, so that a
// prefix written by another deployment is refused: ext is the files'
// extension.
func Deployment(cfg *config.Config, ext string) ledger.Deployment {
	return ledger.Deployment{
		Group:    cfg.Kafka.Group,
		Format:   cfg.Format.Type + "+" + cfg.Format.Compression + " " + ext,
		Template: cfg.File.NameTemplate,
	}
}

// writerName names this process in ledger entries, for people reading
// them: the instance id, or the host and pid.
func writerName(cfg *config.Config) string {
	if cfg.Kafka.InstanceID != "" {
		return cfg.Kafka.InstanceID
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// groupCheckTimeout bounds asking whether another group that wrote a
// partition's ledger has members.
const groupCheckTimeout = 15 * time.Second

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

// StallTimeout is admin.stall_timeout, or when 0 what it derives to:
// file.max_age (a file may wait that long to close) plus the longest the
// storage retries may wait, plus a minute.
func StallTimeout(cfg *config.Config) time.Duration {
	if cfg.Admin.StallTimeout > 0 {
		return cfg.Admin.StallTimeout
	}
	return cfg.File.MaxAge + storage.Retry{MaxAttempts: cfg.Storage.MaxRetries + 1}.Budget() + time.Minute
}

// storageScheme names the backend of a storage URL for metrics.
func storageScheme(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return u.Scheme
	}
	return "unknown"
}

// newKafkaMetrics are the Kafka client's metrics (franz-go's kprom):
// connections, request errors and durations per broker, records and bytes
// fetched per topic. They are served from admin's own registry.
func newKafkaMetrics() *kprom.Metrics {
	return kprom.NewMetrics("spillway_kafka", kprom.Registry(nil),
		kprom.Histograms(kprom.RequestDurationE2E))
}

// encodeSlots is how many spooled files encode at once: one per core Go
// uses.
func encodeSlots() int { return runtime.GOMAXPROCS(0) }

// diskAuto resolves backpressure.disk_limit auto: config.DiskAutoPercent of
// the space free on dir's file system (named spoolDir in errors). It fails
// when that is below config.MinDiskLimit.
func diskAuto(spoolDir, dir string) (limit, free int64, err error) {
	free, err = spool.Free(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("backpressure.spool_dir %s: %w; set backpressure.disk_limit to a size", spoolDir, err)
	}
	limit = free * config.DiskAutoPercent / 100
	if limit < int64(config.MinDiskLimit) {
		return 0, free, fmt.Errorf("backpressure.spool_dir %s has %s free, and disk_limit auto takes %d%% of it, below the minimum of %s: free space there, or choose another directory", spoolDir, mib(free), config.DiskAutoPercent, config.MinDiskLimit)
	}
	return limit, free, nil
}

// openSpool opens the spool of backpressure.spool_dir, if set, and turns on
// the budget's disk resource with backpressure.disk_limit.
func openSpool(bp config.Backpressure, b *budget.Budget, log *slog.Logger) (*spool.Spool, error) {
	if bp.SpoolDir == "" {
		return nil, nil
	}
	limit, auto, err := bp.DiskLimitBytes()
	if err != nil {
		return nil, err
	}
	sp, removed, err := spool.Open(bp.SpoolDir)
	if err != nil {
		return nil, fmt.Errorf("backpressure.spool_dir %s: %w", bp.SpoolDir, err)
	}
	sp.SetLogger(log)
	if auto {
		if limit, _, err = diskAuto(bp.SpoolDir, sp.Dir()); err != nil {
			sp.Close()
			return nil, err
		}
	}
	b.SetDiskLimit(limit)
	log.Info("spool", "dir", sp.Dir(), "disk_limit", mib(limit), "auto", auto, "stale_removed", removed, "encode_slots", encodeSlots())
	return sp, nil
}
