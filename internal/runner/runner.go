// Package runner builds the pipeline a validated config describes and runs
// it. It sizes memory (the budget's plan, and what files cost in it),
// checks storage and Kafka before anything is consumed, chooses the writer
// (the sink and its ledger, or one object per key) and how partitions
// resume from storage, feeds the writer from the consumer through the
// schema registry when one types records, serves the admin endpoint, and
// watches for stalls. A run ends with a graceful stop within
// shutdown.timeout (open files stored, their offsets committed) or with
// the first fatal error.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
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
	// SetGoMaxProcs raises GOMAXPROCS for a run on a local directory
	// (procs.go). The run command sets it, in-process tests of the command
	// too: only Go's own choice is raised, so once per process.
	SetGoMaxProcs bool
	// StorageFaults slow or stall storage (tests, bench).
	StorageFaults *storage.Faults
	// Version is the build's version, for spillway_build_info and the
	// status page.
	Version string
	// Clock is what the stall watch reads the time from and ticks on; nil
	// is the wall clock. Tests give one they move by hand.
	Clock Clock
	// StorageGetenv, when set, replaces the process environment for the
	// settings storage's clients read from it (storage.Options.Getenv):
	// tests that run pipelines against different endpoints at once.
	StorageGetenv func(string) string
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
	p, err := newPipeline(ctx, cfg, log, opts)
	if errors.Is(err, errStoppedEarly) {
		// Stopped during a check: nothing was consumed, so nothing to finish.
		log.Info("stopped cleanly before consuming")
		return nil
	}
	if err != nil {
		return err
	}
	defer p.close()
	return p.run(ctx)
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
		Group:  cfg.Kafka.Group,
		Format: cfg.Format.Type + "+" + cfg.Format.Compression + " " + ext,
		// A table's folder renders {{topic}} as {{topic:dots=_}}
		// (tablepath.Template), which names a topic without dots
		// as {{topic}} did: ledgers of tables written before it was
		// introduced still match.
		Template: strings.ReplaceAll(cfg.File.NameTemplate, "{{topic:dots=_}}", "{{topic}}"),
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
func openSpool(bp config.Backpressure, b *budget.Budget, slots int, log *slog.Logger) (*spool.Spool, error) {
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
	log.Info("spool", "dir", sp.Dir(), "disk_limit", mib(limit), "auto", auto, "stale_removed", removed, "encode_slots", slots)
	return sp, nil
}
