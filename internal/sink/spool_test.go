package sink_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/spool"
	"github.com/spillway/spillway/internal/storage"
)

// withSpool stages open files in a spool under dir.
func withSpool(t *testing.T, dir string) opt {
	return func(_ *harness, c *sink.Config, _ *storage.Options) {
		sp, _, err := spool.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sp.Close() })
		c.Spool = sp
	}
}

// warnings records the messages of WARN and above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.msgs = append(w.msgs, msg)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

func withLog(l *slog.Logger) opt {
	return func(h *harness, _ *sink.Config, _ *storage.Options) { h.log = l }
}

// padded is rec with a value of about size bytes, still readable by
// harness.offsets.
func padded(topic string, p int32, off int64, size int) *kgo.Record {
	r := rec(topic, p, off)
	r.Value = append(r.Value, " "+strings.Repeat("x", size)...)
	return r
}

// drain writes n records to each of parts partitions, in polls of step
// records per partition, as a consumer draining a backlog gets them.
func drain(h *harness, parts int32, n, step int64, size int) map[offsets.TopicPartition]int64 {
	want := map[offsets.TopicPartition]int64{}
	for from := int64(0); from < n; from += step {
		var poll []*kgo.Record
		for p := range parts {
			for off := from; off < min(from+step, n); off++ {
				poll = append(poll, padded("t", p, off, size))
			}
		}
		h.write(poll...)
	}
	for p := range parts {
		want[tp("t", p)] = n
	}
	return want
}

func spoolLeft(t *testing.T, c sink.Config) []string {
	t.Helper()
	ents, err := os.ReadDir(c.Spool.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestSpoolManyPartitions: with a spool, a budget that holds a few dozen
// open files without it holds an open file for each of many partitions,
// and the files close by max_bytes or at the end, never under pressure;
// every record is stored exactly once, and the spool is empty after.
func TestSpoolManyPartitions(t *testing.T) {
	const parts, n, maxBytes = 200, 300, 12 << 10
	b := budget.New(16<<20, 0)
	b.SetDiskLimit(1 << 30)
	h := newHarness(t, withBudget(b), withSpool(t, t.TempDir()), withConfig(func(c *sink.Config) {
		c.MaxOpenFiles = 0
		c.MaxBytes = maxBytes
	}))
	if without := b.MaxOpenFiles(compressorMemory + 64<<10); without >= parts {
		t.Fatalf("the budget allows %d open files without a spool: the test needs fewer than %d", without, parts)
	}
	if got := h.s.MaxOpenFiles(); got < parts {
		t.Fatalf("MaxOpenFiles %d with a spool, want at least %d", got, parts)
	}
	// Memory above its high watermark throughout (storage behind, say):
	// closing spooled files would free nothing.
	b.Acquire(budget.QueuedChunks, b.Limit())
	want := drain(h, parts, n, 50, 20)
	b.Release(budget.QueuedChunks, b.Limit())
	if st := h.s.Stats(); st.FilesOpen != parts {
		t.Fatalf("%d files open before the flush, want one per partition (%d)", st.FilesOpen, parts)
	}
	h.flush()
	files := h.objects()
	h.contiguous(files, want)
	st := h.s.Stats()
	if st.Closed[offsets.ReasonPressure] != 0 || st.Closed[offsets.ReasonOpenFiles] != 0 {
		t.Fatalf("files closed early: %v", st.Closed)
	}
	if st.Closed[offsets.ReasonBytes] < parts {
		t.Fatalf("closed by bytes %d, want at least one per partition (%d): %v", st.Closed[offsets.ReasonBytes], parts, st.Closed)
	}
	if st.Stored != parts*n {
		t.Fatalf("stored %d records, want %d", st.Stored, parts*n)
	}
	// max_bytes is reached approximately: no file far above it, and the
	// files closed by it not far below.
	last := map[offsets.TopicPartition]string{}
	for _, f := range files {
		last[f.tp] = f.key
	}
	for _, f := range files {
		if f.size > maxBytes*3/2 {
			t.Errorf("%s is %d bytes, max_bytes %d", f.key, f.size, maxBytes)
		}
		if last[f.tp] != f.key && f.size < maxBytes/2 {
			t.Errorf("%s is %d bytes, closed by max_bytes %d", f.key, f.size, maxBytes)
		}
	}
	if left := spoolLeft(t, h.cfg); len(left) != 0 {
		t.Fatalf("spool files left after the flush: %v", left)
	}
	if s := b.Snapshot(); s.Disk.Used != 0 || s.Disk.Peak == 0 {
		t.Fatalf("disk used %d (want 0), peak %d (want > 0)", s.Disk.Used, s.Disk.Peak)
	}
}

// TestSpoolDiskPressure: above the disk's high watermark the files with
// the most spooled bytes close early, and nothing is lost or duplicated.
func TestSpoolDiskPressure(t *testing.T) {
	const parts, n = 8, 400
	b := budget.New(1<<30, 0)
	b.SetDiskLimit(256 << 10)
	h := newHarness(t, withBudget(b), withSpool(t, t.TempDir()), withConfig(func(c *sink.Config) {
		c.MaxBytes = 64 << 20
	}))
	want := drain(h, parts, n, 20, 300)
	h.flush()
	h.contiguous(h.objects(), want)
	st := h.s.Stats()
	if st.Closed[offsets.ReasonPressure] == 0 {
		t.Fatalf("%d KiB spooled against a disk limit of 256 KiB, and no file closed under pressure: %v", parts*n*330>>10, st.Closed)
	}
	if s := b.Snapshot(); s.Disk.Used != 0 {
		t.Fatalf("disk used %d after the flush", s.Disk.Used)
	}
}

// TestSpoolFull: a spool on a file system that fills up: files go direct,
// a warning says so, and every record is stored exactly once.
func TestSpoolFull(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("can't mount a 2MiB tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	const parts, n = 16, 300
	b := budget.New(1<<30, 0)
	b.SetDiskLimit(1 << 30) // far above what the tmpfs holds
	w := &warnings{}
	h := newHarness(t, withBudget(b), withSpool(t, dir), withLog(slog.New(w)), withConfig(func(c *sink.Config) {
		c.MaxBytes = 256 << 10
	}))
	want := drain(h, parts, n, 25, 1000) // about 5 MB
	h.flush()
	h.contiguous(h.objects(), want)
	st := h.s.Stats()
	if st.SpoolFaults == 0 {
		t.Fatal("no spool fault counted on a full file system")
	}
	if st.Stored != parts*n {
		t.Fatalf("stored %d, want %d", st.Stored, parts*n)
	}
	var seen bool
	for _, m := range w.all() {
		if strings.Contains(m, "the spool failed") && strings.Contains(m, "no space left on device") && strings.Contains(m, "disk under backpressure.spool_dir is full") {
			seen = true
		}
	}
	if !seen {
		t.Fatalf("no warning of the full spool; warnings: %q", w.all())
	}
	if left := spoolLeft(t, h.cfg); len(left) != 0 {
		t.Fatalf("spool files left: %v", left)
	}
}

// TestSpoolReadBackFails: a spool file that can't be read back fails its
// file: never published, the sink stops, nothing committed.
func TestSpoolReadBackFails(t *testing.T) {
	b := budget.New(1<<30, 0)
	b.SetDiskLimit(1 << 30)
	h := newHarness(t, withBudget(b), withSpool(t, t.TempDir()))
	h.write(recs("t", 0, 0, 100)...)
	h.eventually("the batch spooled", func() bool { return b.Snapshot().Disk.Used > 0 })
	left := spoolLeft(t, h.cfg)
	if len(left) != 1 {
		t.Fatalf("spool holds %v, want one file", left)
	}
	if err := os.Truncate(filepath.Join(h.cfg.Spool.Dir(), left[0]), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := h.s.Flush(ctx, nil, offsets.ReasonShutdown)
	if !errors.Is(err, spool.ErrCorrupt) {
		t.Fatalf("Flush: %v, want the spool's read error", err)
	}
	if files := h.objects(); len(files) != 0 {
		t.Fatalf("stored %d files from a spool file that could not be read", len(files))
	}
	if c := h.s.Committable(nil); len(c) != 0 {
		t.Fatalf("committable %v", c)
	}
}

// TestRelieveByMemory: under memory pressure, the file holding the most
// memory closes first: a Parquet file filling a row group, not one that
// wrote more bytes out but holds less.
func TestRelieveByMemory(t *testing.T) {
	pq := jsonlFormat
	pq.Type = "parquet"
	b := budget.New(1<<30, 0)
	var mu sync.Mutex
	closed := map[int32]offsets.Reason{}
	h := newHarness(t, withBudget(b), withConfig(func(c *sink.Config) {
		c.Extension = ".parquet"
		c.NewBufferedEncoder = func(w io.Writer, flush int64, grow func(int64)) (format.Encoder, error) {
			return formats.NewBufferedEncoder(pq, w, format.Memory{FlushBytes: flush, Grow: grow})
		}
		c.FlushBytes = 1 << 20
		c.OnClose = func(c offsets.Closed) {
			mu.Lock()
			defer mu.Unlock()
			closed[c.Partition.Partition] = c.Reason
		}
	}))
	// p1 writes a row group out and starts another; p0 fills most of one.
	var poll []*kgo.Record
	for off := range int64(1200) {
		poll = append(poll, padded("t", 1, off, 1000))
	}
	for off := range int64(900) {
		poll = append(poll, padded("t", 0, off, 1000))
	}
	h.write(poll...)
	h.eventually("every batch encoded", func() bool {
		for _, hb := range b.Snapshot().By {
			if hb.Holder == budget.QueuedRecords {
				return hb.Bytes == 0
			}
		}
		return true
	})
	// Memory over its high watermark: the next write relieves it.
	b.Acquire(budget.QueuedChunks, b.Limit())
	defer b.Release(budget.QueuedChunks, b.Limit())
	h.write(padded("t", 0, 900, 10))
	mu.Lock()
	defer mu.Unlock()
	if closed[0] != offsets.ReasonPressure || closed[1] != "" {
		t.Fatalf("closed %v: want partition 0 (its row group is the larger) closed under pressure, and 1 open", closed)
	}
}

// TestSpoolDirRemoved: the spool's directory removed under a running
// sink is created again by the next file (package spool), which is
// spooled; nothing is lost or duplicated.
func TestSpoolDirRemoved(t *testing.T) {
	b := budget.New(1<<30, 0)
	b.SetDiskLimit(1 << 30)
	h := newHarness(t, withBudget(b), withSpool(t, t.TempDir()), withConfig(func(c *sink.Config) { c.MaxRecords = 50 }))
	h.write(recs("t", 0, 0, 120)...) // two files closed, one open on the spool
	removeSpoolDir(t, h.cfg.Spool.Dir())
	h.write(recs("t", 1, 0, 120)...) // new files: no spool to create them in
	h.write(recs("t", 0, 120, 200)...)
	h.flush()
	h.contiguous(h.objects(), map[offsets.TopicPartition]int64{tp("t", 0): 200, tp("t", 1): 120})
	if st := h.s.Stats(); st.SpoolFaults != 0 {
		t.Errorf("%d spool faults: the directory was not created again", st.SpoolFaults)
	}
	if _, err := os.Stat(h.cfg.Spool.Dir()); err != nil {
		t.Errorf("spool directory not created again: %v", err)
	}
}

// TestSpoolDirReplaced: a spool directory that can't be created again (a
// file stands in its place) fails the next spool file, whose file goes
// direct: the warning names the cause, not a full disk, which it used to
// for every spool error.
func TestSpoolDirReplaced(t *testing.T) {
	root := filepath.Join(t.TempDir(), "spool")
	b := budget.New(1<<30, 0)
	b.SetDiskLimit(1 << 30)
	w := &warnings{}
	h := newHarness(t, withBudget(b), withSpool(t, root), withLog(slog.New(w)), withConfig(func(c *sink.Config) { c.MaxRecords = 50 }))
	// One file, closed and published, and none open: no file goroutine
	// creates a spool file while the directory is replaced, so every
	// spool file after it fails.
	h.write(recs("t", 0, 0, 50)...)
	h.eventually("the closed file published and its spool file removed", func() bool {
		spooled, _ := filepath.Glob(filepath.Join(root, "*", "*.spool"))
		return len(h.objects()) == 1 && len(spooled) == 0
	})
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.write(recs("t", 1, 0, 60)...)
	h.write(recs("t", 0, 50, 60)...)
	h.flush()
	h.contiguous(h.objects(), map[offsets.TopicPartition]int64{tp("t", 0): 60, tp("t", 1): 60})
	if st := h.s.Stats(); st.SpoolFaults == 0 {
		t.Fatalf("no spool fault counted with a file in the spool directory's place: %+v", st)
	}
	var msgs []string
	for _, m := range w.all() {
		if strings.Contains(m, "the spool failed") {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0], "not a directory") || strings.Contains(msgs[0], "full") || strings.Contains(msgs[0], "ree space") {
		t.Errorf("spool warnings %q: want one naming the cause (not a directory), not a full disk", msgs)
	}
}

// TestSpoolRecordTrigger: backpressure.max_buffered_records counts
// spooled records too, and closing the files with the most records is
// what lowers it: spooled files are closed for it.
func TestSpoolRecordTrigger(t *testing.T) {
	b := budget.New(1<<30, 500)
	b.SetDiskLimit(1 << 30)
	h := newHarness(t, withBudget(b), withSpool(t, t.TempDir()))
	var poll []*kgo.Record
	for p := range int32(4) {
		poll = append(poll, recs("t", p, 0, 150+int64(p)*10)...)
	}
	h.write(poll...)
	st := h.s.Stats()
	if st.Closed[offsets.ReasonPressure] == 0 {
		t.Fatalf("%d records buffered against max_buffered_records 500, and no file closed: %v", st.Records, st.Closed)
	}
	if b.OverRecords() {
		t.Fatal("still over the record trigger after relief")
	}
	h.flush()
	h.contiguous(h.objects(), map[offsets.TopicPartition]int64{tp("t", 0): 150, tp("t", 1): 160, tp("t", 2): 170, tp("t", 3): 180})
}

// TestSpoolWaitsForRoom: a closed spooled file goes direct only once its
// chain and chunk fit in the memory budget, unless no other spooled file
// is encoding or waiting to be published (then waiting frees nothing).
// With commits held back and 100 closed files whose bookkeeping alone
// fills the budget, one file goes direct and the others wait, spooled.
func TestSpoolWaitsForRoom(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	b := budget.New(1<<20, 0)
	b.SetDiskLimit(1 << 30)
	h := newHarness(t, withBudget(b), withSpool(t, t.TempDir()), withAccounting(),
		withConfig(func(c *sink.Config) { c.MaxRecords = 20 }),
		func(_ *harness, _ *sink.Config, o *storage.Options) {
			o.Faults = &storage.Faults{BeforeCommit: func(string) error { <-release; return nil }}
		})
	h.write(recs("t", 0, 0, 2000)...) // 100 files, all closed
	// Wait for files that wait: the disk holds nothing yet until the
	// file goroutines have appended their records (a busy machine), so
	// an empty spool is no sign that every file was encoded.
	h.eventually("files waiting for room in the budget (none means every file was encoded while none could be published)", func() bool {
		return h.s.Stats().SpoolWaiting > 0
	})
	if s := b.Snapshot(); s.Disk.Used == 0 {
		t.Fatalf("every file was encoded while none could be published, and memory used %d of %d", s.Used, s.Limit)
	}
	free()
	h.flush()
	h.contiguous(h.objects(), map[offsets.TopicPartition]int64{tp("t", 0): 2000})
	if st := h.s.Stats(); st.SpoolWaiting != 0 {
		t.Fatalf("%d files still waiting after the flush", st.SpoolWaiting)
	}
}

// removeSpoolDir removes a running sink's spool directory. A file
// goroutine may create its spool file in it while it is being removed
// (they append after the write returns), and the directory is then not
// empty: removing again takes that file too.
func removeSpoolDir(t *testing.T, dir string) {
	t.Helper()
	var err error
	for range 100 {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
	}
	t.Fatal(err)
}
