package runner

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/storage"
)

// MemoryWarnings says, for `config check`, whether the storage settings fit
// in the memory plan that backpressure.memory_limit gives here (with auto:
// this machine's cgroup, or the default), and whether disk_limit auto
// leaves the spool enough room here, as a run would find at its start.
func MemoryWarnings(cfg *config.Config) ([]string, error) {
	sz, err := sizingOf(cfg)
	if err != nil {
		return nil, err
	}
	w := memoryWarnings(cfg, sz)
	if d := diskWarning(cfg.Backpressure); d != "" {
		w = append(w, d)
	}
	return w, nil
}

// diskWarning is why a run here would refuse disk_limit auto, or "". The
// spool directory may not exist yet: a run makes it, on the file system of
// its nearest existing parent, which is where the space is read.
func diskWarning(bp config.Backpressure) string {
	if bp.SpoolDir == "" {
		return ""
	}
	if _, auto, err := bp.DiskLimitBytes(); err != nil || !auto {
		return ""
	}
	dir := filepath.Clean(bp.SpoolDir)
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	if _, _, err := diskAuto(bp.SpoolDir, dir); err != nil {
		return err.Error() + "; a run here would not start"
	}
	return ""
}

// sizing is a config's memory plan, where its limit came from, and what
// its files cost in that plan: worked out once, for a run and for
// `config check`.
type sizing struct {
	plan  budget.Plan
	where string
	// slots is how many spooled files encode at once (encodeSlots), read
	// once: a run on a local directory raises GOMAXPROCS after (procs.go),
	// which must not add encode slots, whose memory the plan prices.
	slots int
	budget.Sizing
}

// sizingOf resolves backpressure.memory_limit and prices the config's
// files in the plan it gives: the format's figures (format.Kind) and the
// store's (storage.FootprintOf).
func sizingOf(cfg *config.Config) (sizing, error) {
	plan, where, err := MemoryPlan(cfg.Backpressure)
	if err != nil {
		return sizing{}, err
	}
	// So that the warning about records larger than the budget's room
	// gives this format's figures.
	plan.RecordCopies = formats.Of(cfg.Format.Type).LargeRecordCopies(cfg.Format)
	return sizingIn(cfg, plan, where), nil
}

// sizingIn prices the config's files in plan, whose limit came from where.
func sizingIn(cfg *config.Config, plan budget.Plan, where string) sizing {
	kind := formats.Of(cfg.Format.Type)
	slots := encodeSlots()
	scheme := ""
	if u, err := url.Parse(cfg.Storage.URL); err == nil {
		scheme = u.Scheme
	}
	fp := storage.FootprintOf(scheme, int64(cfg.Storage.PartSize))
	sz := budget.Sizing{
		// Avro blocks and Parquet row groups are cut at half of an open
		// file's share of the budget, and in an encode slot at half of
		// the slot's; the sink counts them as they grow.
		FlushBytes:     kind.FlushBytes(plan.FileShare(cfg.Backpressure.MaxOpenFiles)),
		SlotFlushBytes: kind.FlushBytes(plan.EncodeShare(slots)),
		Files:          max(cfg.Backpressure.MaxOpenFiles, 1),
		Spooled:        cfg.Backpressure.SpoolDir != "",
		Writer:         fp.Writer,
		Chunk:          fp.Chunk,
		Uploads:        cfg.Storage.UploadConcurrency,
		UploadBytes:    fp.Upload,
	}
	flush := sz.FlushBytes
	if sz.Spooled {
		// Open files cost budget.SpoolFileCost each, within their half of
		// the share; the chains are the encode slots'.
		sz.Files, flush = slots, sz.SlotFlushBytes
	}
	sz.Encoder = kind.FixedMemory(cfg.Format) + kind.MaxBuffered(flush)
	sz.FileCost = sz.Encoder + sz.Writer + sz.Chunk
	return sizing{plan: plan, where: where, slots: slots, Sizing: sz}
}

// memoryWarnings checks that the data budget holds what the storage
// settings need at the least (budget.Sizing.Need): the fetch share, one
// writer per open file (one file when their number is derived), and
// storage.upload_concurrency parts in flight. When it doesn't, Spillway
// still runs, but opening a file or waiting for uploads takes it over its
// limit.
func memoryWarnings(cfg *config.Config, sz sizing) []string {
	plan, where := sz.plan, sz.where
	files, fileCost, spooled := sz.Files, sz.FileCost, sz.Spooled
	uploads := sz.Uploads
	need := sz.Need
	if need(plan) <= plan.Data {
		return nil
	}
	limit := "backpressure.memory_limit " + cfg.Backpressure.MemoryLimit
	if where != "backpressure.memory_limit" {
		limit = fmt.Sprintf("backpressure.memory_limit auto, which is %s here (%s),", mib(plan.Process), where)
	}
	fix := "lower storage.part_size or storage.upload_concurrency"
	if cfg.Backpressure.MaxOpenFiles > 0 && !spooled {
		fix += ", or backpressure.max_open_files"
	}
	if min, ok := budget.SmallestLimit(func(p budget.Plan) bool { return need(p) <= p.Data }); ok {
		fix = fmt.Sprintf("set backpressure.memory_limit to at least %s, or %s", mib(min), fix)
	}
	openFiles := "one open file"
	switch {
	case spooled:
		openFiles = fmt.Sprintf("%d encode slots (one per core, with backpressure.spool_dir) of %s each", files, mib(fileCost))
	case files > 1:
		openFiles = fmt.Sprintf("backpressure.max_open_files %d open files of %s each", files, mib(fileCost))
	}
	return []string{fmt.Sprintf("%s leaves a data budget of %s, and the storage settings need %s of it at the least: "+
		"%s for fetches, %s for %s (%s of %s state, %s of writer buffers, a %s chunk), and %s for storage.upload_concurrency %d × %s parts in flight. "+
		"Spillway would go over its memory limit: %s",
		limit, mib(plan.Data), mib(need(plan)),
		mib(plan.Reserved), mib(int64(files)*fileCost), openFiles, mib(sz.Encoder), encoderName(cfg.Format), mib(sz.Writer), mib(sz.Chunk),
		mib(int64(uploads)*sz.UploadBytes), uploads, mib(sz.UploadBytes), fix)}
}

// encoderName names what holds an open file's encoder memory.
func encoderName(f config.Format) string {
	switch {
	case f.Type == "avro" || f.Type == "parquet":
		return f.Type
	case f.Compression == "" || f.Compression == "none":
		return "encoder"
	}
	return f.Compression
}

// mib renders n bytes in MiB, with one decimal below 10MiB.
func mib(n int64) string {
	if n < 10<<20 && n%(1<<20) != 0 {
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%dMiB", (n+1<<20-1)>>20)
}
