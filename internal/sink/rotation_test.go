package sink_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
)

func TestRotateOnMaxRecords(t *testing.T) {
	for _, backend := range []struct {
		name string
		opt  opt
	}{{"file", withFile()}, {"mem", withMem()}} {
		t.Run(backend.name, func(t *testing.T) {
			h := newHarness(t, backend.opt, withConfig(func(c *sink.Config) { c.MaxRecords = 4 }))
			// Two partitions, interleaved, in uneven batches.
			var all []*kgo.Record
			for off := int64(0); off < 10; off++ {
				all = append(all, rec("t", 0, off), rec("t", 1, off))
			}
			for len(all) > 0 {
				n := min(3, len(all))
				h.write(all[:n]...)
				all = all[n:]
			}
			st := h.s.Stats()
			if st.Closed[offsets.ReasonRecords] != 4 || st.FilesOpen != 2 || st.Records != 20 {
				t.Fatalf("before Flush: %+v, want 4 files closed by records, 2 open, 20 records", st)
			}
			h.flush()

			files := h.objects()
			var names []string
			for _, f := range files {
				names = append(names, f.key)
			}
			want := []string{key("t", 0, 0), key("t", 0, 4), key("t", 0, 8), key("t", 1, 0), key("t", 1, 4), key("t", 1, 8)}
			if strings.Join(names, " ") != strings.Join(want, " ") {
				t.Fatalf("objects %v, want %v", names, want)
			}
			h.contiguous(files, map[offsets.TopicPartition]int64{tp("t", 0): 10, tp("t", 1): 10})
			for _, f := range files {
				if n := len(f.lines); n > 4 {
					t.Fatalf("%s holds %d records, max_records is 4", f.key, n)
				}
			}

			st = h.s.Stats()
			var bytes int
			for _, f := range files {
				bytes += f.size
			}
			if st.Closed[offsets.ReasonRecords] != 4 || st.Closed[offsets.ReasonShutdown] != 2 || st.FilesOpen != 0 ||
				st.FilesUploaded != 6 || st.BytesUploaded != int64(bytes) || st.Uploading != 0 || st.Skipped != 0 {
				t.Fatalf("after Flush: %+v (stored bytes %d)", st, bytes)
			}
			if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 10, tp("t", 1): 10}) {
				t.Fatalf("Committable = %v, want 10 for both", got)
			}
		})
	}
}

func TestRotateOnMaxBytes(t *testing.T) {
	const maxBytes = 1000
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxBytes = maxBytes }))
	const n = 60
	for off := int64(0); off < n; off++ {
		r := rec("t", 0, off)
		// Values of varying size, so files end at varying record counts.
		r.Value = append(r.Value, " "+strings.Repeat("x", int(off%7)*20)...)
		h.write(r)
	}
	h.flush()
	files := h.objects()
	if len(files) < 5 {
		t.Fatalf("%d files for ~%d bytes at max_bytes %d", len(files), n*150, maxBytes)
	}
	h.contiguous(files, map[offsets.TopicPartition]int64{tp("t", 0): n})
	for i, f := range files {
		last := f.lineSizes[len(f.lineSizes)-1]
		if f.size-last >= maxBytes {
			t.Errorf("%s: %d bytes before its last record; it should have rotated earlier", f.key, f.size-last)
		}
		if i < len(files)-1 && f.size < maxBytes {
			t.Errorf("%s: rotated at %d bytes, below max_bytes %d", f.key, f.size, maxBytes)
		}
	}
	st := h.s.Stats()
	if st.Closed[offsets.ReasonBytes] != int64(len(files)-1) || st.Closed[offsets.ReasonShutdown] > 1 {
		t.Fatalf("Closed = %v for %d files", st.Closed, len(files))
	}
}

// Near max_bytes the poll side reads the file's exact size only as often
// as it must: after each reading it queues records until they may fill
// half the room left. Files still rotate at the record that reaches
// max_bytes, with a few waits per file where there was one per record of
// the last eighth.
func TestRotateOnMaxBytesWaitsSeldom(t *testing.T) {
	const maxBytes = 64 << 10
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxBytes = maxBytes }))
	const n = 3000 // some 200 bytes each: 9 files, 40 records in each one's last eighth
	var batch []*kgo.Record
	for off := int64(0); off < n; off++ {
		r := rec("t", 0, off)
		r.Value = append(r.Value, " "+strings.Repeat("x", 120+int(off%5))...)
		batch = append(batch, r)
		if len(batch) == 100 {
			h.write(batch...)
			batch = batch[:0]
		}
	}
	h.write(batch...)
	waits := h.s.SizeWaits()
	t.Logf("%d waits", waits)
	h.flush()
	files := h.objects()
	h.contiguous(files, map[offsets.TopicPartition]int64{tp("t", 0): n})
	for i, f := range files {
		last := f.lineSizes[len(f.lineSizes)-1]
		if f.size-last >= maxBytes {
			t.Errorf("%s: %d bytes before its last record; it should have rotated earlier", f.key, f.size-last)
		}
		if i < len(files)-1 && f.size < maxBytes {
			t.Errorf("%s: rotated at %d bytes, below max_bytes %d", f.key, f.size, maxBytes)
		}
	}
	if rotated := int64(len(files) - 1); rotated < 8 || waits > 12*rotated {
		t.Fatalf("%d waits for an exact size over %d rotations, want at most 12 each", waits, rotated)
	}
}

func TestRotateOnMaxAge(t *testing.T) {
	const maxAge = time.Hour
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxAge = maxAge }))
	ctx := context.Background()

	h.write(rec("t", 0, 0), rec("t", 0, 1))
	// Partition 0's file is now strictly older than anything opened after
	// mid.
	mid := time.Now()
	for !time.Now().After(mid) {
	}
	h.write(rec("t", 1, 0))

	if err := h.s.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := h.s.Stats(); st.FilesOpen != 2 || st.Closed[offsets.ReasonAge] != 0 {
		t.Fatalf("young files closed: %+v", st)
	}

	// Partition 1 keeps receiving records; partition 0 is idle.
	h.write(rec("t", 1, 1), rec("t", 1, 2))
	if err := h.s.Tick(ctx, mid.Add(maxAge)); err != nil {
		t.Fatal(err)
	}
	st := h.s.Stats()
	if st.Closed[offsets.ReasonAge] != 1 || st.FilesOpen != 1 {
		t.Fatalf("after max_age of the idle file: %+v, want partition 0 closed by age and 1 open", st)
	}
	// Its upload completes without any further record.
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.s.Flush(waitCtx, map[offsets.TopicPartition]bool{tp("t", 0): true}, offsets.ReasonRevoke); err != nil {
		t.Fatal(err)
	}
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 2}) {
		t.Fatalf("Committable = %v, want only partition 0 at 2", got)
	}
	if st := h.s.Stats(); st.Closed[offsets.ReasonRevoke] != 0 {
		t.Fatalf("Flush of an already closed partition closed something: %v", st.Closed)
	}

	// Age counts from the file's first record, not its last.
	if err := h.s.Tick(ctx, time.Now().Add(maxAge)); err != nil {
		t.Fatal(err)
	}
	if st := h.s.Stats(); st.Closed[offsets.ReasonAge] != 2 || st.FilesOpen != 0 {
		t.Fatalf("after max_age of the busy file: %+v", st)
	}
	h.flush()
	h.contiguous(h.objects(), map[offsets.TopicPartition]int64{tp("t", 0): 2, tp("t", 1): 3})
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 1): 3}) {
		t.Fatalf("Committable = %v", got)
	}
}

func TestTickWithoutMaxAgeDoesNothing(t *testing.T) {
	h := newHarness(t)
	h.write(rec("t", 0, 0))
	if err := h.s.Tick(context.Background(), time.Now().Add(1000*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st := h.s.Stats(); st.FilesOpen != 1 || len(st.Closed) != 0 {
		t.Fatalf("Tick closed files with max_age 0: %+v", st)
	}
}

func TestRunTickerClosesIdleFiles(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxAge = 20 * time.Millisecond }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.s.RunTicker(ctx) }()
	defer func() { cancel(); <-done }()

	h.write(rec("t", 0, 0))
	h.eventually("the ticker to upload the idle file", func() bool { return h.s.Stats().FilesUploaded == 1 })
	if st := h.s.Stats(); st.Closed[offsets.ReasonAge] != 1 {
		t.Fatalf("Closed = %v", st.Closed)
	}
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 1}) {
		t.Fatalf("Committable = %v", got)
	}
}

func TestMaxOpenFiles(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxOpenFiles = 2 }))
	if h.s.MaxOpenFiles() != 2 {
		t.Fatalf("MaxOpenFiles = %d", h.s.MaxOpenFiles())
	}
	const parts, per = 5, 10
	want := map[offsets.TopicPartition]int64{}
	for off := int64(0); off < per; off++ {
		for p := int32(0); p < parts; p++ {
			h.write(rec("t", p, off))
			if n := h.s.Stats().FilesOpen; n > 2 {
				t.Fatalf("%d files open, max_open_files is 2", n)
			}
			want[tp("t", p)] = per
		}
	}
	st := h.s.Stats()
	if st.Closed[offsets.ReasonOpenFiles] != parts*per-2 {
		t.Fatalf("Closed = %v; round-robin over 5 partitions with 2 slots evicts on every record but the first two", st.Closed)
	}
	h.flush()
	files := h.objects()
	if len(files) != parts*per {
		t.Fatalf("%d files, want %d", len(files), parts*per)
	}
	h.contiguous(files, want)
	if got := h.s.Committable(nil); !maps.Equal(got, want) {
		t.Fatalf("Committable = %v, want %v", got, want)
	}
}

func TestMaxOpenFilesEvictsLeastRecentlyUsed(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxOpenFiles = 2 }))
	h.write(rec("t", 0, 0))
	h.write(rec("t", 1, 0))
	h.write(rec("t", 0, 1)) // partition 1 is now the least recently used
	h.write(rec("t", 2, 0))
	st := h.s.Stats()
	if st.FilesOpen != 2 || st.Closed[offsets.ReasonOpenFiles] != 1 {
		t.Fatalf("%+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Partition 1 has nothing open: Flush only waits for its upload.
	if err := h.s.Flush(ctx, map[offsets.TopicPartition]bool{tp("t", 1): true}, offsets.ReasonRevoke); err != nil {
		t.Fatal(err)
	}
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 1): 1}) {
		t.Fatalf("Committable = %v, want partition 1 evicted and durable, 0 and 2 still open", got)
	}
	if st := h.s.Stats(); st.FilesOpen != 2 || st.Closed[offsets.ReasonRevoke] != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestMaxOpenFilesDerivedFromBudget(t *testing.T) {
	b := budget.New(100<<20, 0)
	h := newHarness(t, withBudget(b), withMem(), withConfig(func(c *sink.Config) { c.MaxOpenFiles = 0 }))
	perFile := int64(compressorMemory) + h.bucket.WriterMemory()
	if ps, ok := any(h.bucket).(interface{ ChunkSize() int64 }); ok {
		perFile += ps.ChunkSize() // the part buffer each open file fills
	}
	if want := int(b.Limit() / 2 / perFile); h.s.MaxOpenFiles() != want {
		t.Fatalf("MaxOpenFiles = %d, want half the budget / %d per file = %d", h.s.MaxOpenFiles(), perFile, want)
	}

	// A budget too small for even one file still allows one.
	h2 := newHarness(t, withBudget(budget.New(1, 0)), withMem(), withConfig(func(c *sink.Config) { c.MaxOpenFiles = 0 }))
	if h2.s.MaxOpenFiles() != 1 {
		t.Fatalf("MaxOpenFiles = %d, want at least 1", h2.s.MaxOpenFiles())
	}
}

// A local bucket may report no writer memory beyond its accounted part
// buffers, and compression none has no state: deriving max_open_files must
// not divide by a zero per-file cost.
func TestMaxOpenFilesDerivedWithZeroFileMemory(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("sink.New panicked: %v", r)
		}
	}()
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxOpenFiles = 0; c.CompressorMemory = 0 }))
	if h.s.MaxOpenFiles() < 1 {
		t.Fatalf("MaxOpenFiles = %d", h.s.MaxOpenFiles())
	}
}
