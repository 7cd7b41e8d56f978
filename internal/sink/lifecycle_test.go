package sink_test

import (
	"maps"
	"testing"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
)

func TestDropAbandonsOpenFiles(t *testing.T) {
	b := budget.New(1<<30, 0)
	b.Acquire(budget.FetchBuffers, 4242)
	h := newHarness(t, withBudget(b), withAccounting(), withConfig(func(c *sink.Config) { c.NullValues = "ignore" }))
	h.write(recs("t", 0, 0, 3)...)
	h.write(recs("t", 1, 0, 3)...)
	h.write(null("t", 2, 0), null("t", 2, 1)) // skipped, durable, not yet popped

	h.s.Drop(map[offsets.TopicPartition]bool{tp("t", 0): true, tp("t", 2): true})
	st := h.s.Stats()
	if st.FilesOpen != 1 || st.FilesUploaded != 0 {
		t.Fatalf("after Drop: %+v", st)
	}
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable after Drop = %v, want nothing (t/2's skips are forgotten too)", got)
	}
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 1): 3}) {
		t.Fatalf("Committable = %v, want only t/1", got)
	}
	if got := h.localFiles(); len(got) != 1 || got[0] != key("t", 1, 0) {
		t.Fatalf("files %v: the dropped file must leave nothing, not even a temp file", got)
	}
	if s := b.Snapshot(); s.Used != 4242 || s.Records != 0 {
		t.Fatalf("budget after Drop and Flush: %+v, want only the outside 4242 bytes", s)
	}

	// The partition comes back (same offsets): the abandoned file left no
	// object in the way.
	h.write(recs("t", 0, 0, 2)...)
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 2}) {
		t.Fatalf("Committable = %v", got)
	}
	h.contiguous(h.objects(), map[offsets.TopicPartition]int64{tp("t", 0): 2, tp("t", 1): 3})

	// Dropping partitions with nothing open is harmless.
	h.s.Drop(map[offsets.TopicPartition]bool{tp("x", 9): true})
	h.s.Drop(nil)
}

func TestCloseAbandonsOpenFiles(t *testing.T) {
	b := budget.New(1<<30, 0)
	h := newHarness(t, withBudget(b), withAccounting())
	h.write(recs("t", 0, 0, 3)...)
	h.write(recs("t", 1, 0, 3)...)
	h.close()
	if got := h.localFiles(); len(got) != 0 {
		t.Fatalf("files %v after Close without Flush", got)
	}
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable = %v", got)
	}
	if s := b.Snapshot(); s.Used != 0 || s.Records != 0 {
		t.Fatalf("budget after Close: %+v", s)
	}
}

func TestBudgetAccounting(t *testing.T) {
	for _, backend := range []struct {
		name string
		opt  opt
	}{{"file", withFile()}, {"mem", withMem()}} {
		t.Run(backend.name, func(t *testing.T) {
			const outside = 12345
			b := budget.New(1<<30, 0)
			b.Acquire(budget.FetchBuffers, outside)
			h := newHarness(t, backend.opt, withBudget(b), withAccounting(), withConfig(func(c *sink.Config) { c.MaxRecords = 50 }))
			fileMem := compressorMemory + h.bucket.WriterMemory()

			h.write(recs("t", 0, 0, 3)...)
			h.write(recs("t", 1, 0, 3)...)
			h.write(recs("t", 2, 0, 4)...)
			s := b.Snapshot()
			if s.Records != 10 {
				t.Fatalf("Records = %d, want 10 buffered", s.Records)
			}
			if held := holder(s, budget.FileEncoders); held != 3*compressorMemory {
				t.Fatalf("file encoders hold %d, want 3 files x %d", held, compressorMemory)
			}
			if held, want := holder(s, budget.WriterBuffers), 3*h.bucket.WriterMemory(); held != want {
				t.Fatalf("writer buffers hold %d, want 3 files x %d", held, want/3)
			}
			if s.Used < outside+3*fileMem {
				t.Fatalf("Used = %d, want at least %d", s.Used, outside+3*fileMem)
			}
			open := s.Used

			h.flush()
			s = b.Snapshot()
			if s.Used != outside || s.Records != 0 {
				t.Fatalf("after Flush: %+v, want only the outside %d bytes and no records", s, outside)
			}
			if s.Peak < open {
				t.Fatalf("Peak %d below the %d held while files were open", s.Peak, open)
			}

			// Rotation, and a file left open at Close.
			h.write(recs("t", 0, 3, 200)...)
			h.close()
			if s := b.Snapshot(); s.Used != outside || s.Records != 0 {
				t.Fatalf("after Close: %+v", s)
			}
			for _, hb := range b.Snapshot().By {
				if hb.Holder != budget.FetchBuffers && hb.Bytes != 0 {
					t.Fatalf("%s still holds %d", hb.Holder, hb.Bytes)
				}
			}
		})
	}
}

func holder(s budget.Snapshot, h budget.Holder) int64 {
	for _, hb := range s.By {
		if hb.Holder == h {
			return hb.Bytes
		}
	}
	return 0
}

// Above the record trigger, Write flushes the largest open file early.
func TestPressureRecordTrigger(t *testing.T) {
	b := budget.New(1<<30, 5)
	h := newHarness(t, withBudget(b))
	h.write(rec("t", 0, 0), rec("t", 0, 1), rec("t", 0, 2), rec("t", 1, 0), rec("t", 1, 1))
	st := h.s.Stats()
	if st.Closed[offsets.ReasonPressure] != 1 || st.FilesOpen != 1 {
		t.Fatalf("%+v, want the larger file (t/0) closed under pressure", st)
	}
	if b.Over() {
		t.Fatal("still Over after relieving")
	}
	if r := b.Snapshot().Records; r != 2 {
		t.Fatalf("Records = %d, want t/1's 2", r)
	}
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 3, tp("t", 1): 2}) {
		t.Fatalf("Committable = %v", got)
	}
	if objs := h.objects(); len(objs) != 2 {
		t.Fatalf("%d files", len(objs))
	}
}

// Above the byte watermark, Write closes files, largest first.
func TestPressureBytes(t *testing.T) {
	const fileMem = compressorMemory // a local bucket's writer memory is in its part buffers
	b := budget.New(10*fileMem, 0)   // high 9 files' worth
	b.Acquire(budget.FetchBuffers, 8*fileMem)
	h := newHarness(t, withBudget(b), withConfig(func(c *sink.Config) { c.MaxOpenFiles = 10 }))
	if h.bucket.WriterMemory() != 0 {
		t.Skip("the local bucket reports writer memory; this test sizes the budget in compressor units")
	}
	h.write(recs("t", 0, 0, 5)...) // 9 units: at the watermark, not over
	if st := h.s.Stats(); st.Closed[offsets.ReasonPressure] != 0 {
		t.Fatalf("closed under pressure at exactly the watermark: %v", st.Closed)
	}
	h.write(recs("t", 1, 0, 2)...) // 10 units: over
	st := h.s.Stats()
	if st.Closed[offsets.ReasonPressure] != 1 || st.FilesOpen != 1 {
		t.Fatalf("%+v, want one file closed under pressure", st)
	}
	ctx := t.Context()
	// The larger file (t/0, 5 records) went first.
	if err := h.s.Flush(ctx, map[offsets.TopicPartition]bool{tp("t", 0): true}, offsets.ReasonRevoke); err != nil {
		t.Fatal(err)
	}
	if st := h.s.Stats(); st.Closed[offsets.ReasonRevoke] != 0 || st.FilesOpen != 1 {
		t.Fatalf("t/0 was still open: %+v", st)
	}
	h.flush()
	if s := b.Snapshot(); s.Used != 8*fileMem {
		t.Fatalf("Used = %d after Flush", s.Used)
	}
}

func TestStatsIsACopy(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxRecords = 1 }))
	h.write(rec("t", 0, 0))
	st := h.s.Stats()
	st.Closed[offsets.ReasonRecords] = 99
	if h.s.Stats().Closed[offsets.ReasonRecords] != 1 {
		t.Fatal("changing a Stats copy changed the sink's counters")
	}
}

// TestNoRoomRelievesToLow: a file must open, the budget has no room for
// it, and yet it is not over its high watermark. The source then waits for
// the low watermark (WaitLow), so relief must close files down to it:
// closing none left the source waiting until file.max_age closed them,
// minutes at the default (seen draining 1000 partitions in parquet with a
// max_age of 4m: fetching paused with the budget between its watermarks,
// and nothing moved).
func TestNoRoomRelievesToLow(t *testing.T) {
	h, b := betweenWatermarks(t)
	n, err := h.s.WriteSome(t.Context(), recs("t", 2, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("WriteSome wrote %d records: want none, the budget has no room for t/2's file", n)
	}
	if st := h.s.Stats(); st.Closed[offsets.ReasonPressure] == 0 {
		t.Fatalf("no file closed while a file can't open and the source waits for the low watermark: %+v", st.Closed)
	}
	h.eventually("the budget below its low watermark", b.MemoryLow)
}

// TestRelieveWhenIdle: the fetch waits, paused, for the low watermark, and
// the budget sits between its watermarks with no upload in flight: only
// closing files frees memory, and the source asks for it (Relieve).
func TestRelieveWhenIdle(t *testing.T) {
	h, b := betweenWatermarks(t)
	if err := h.s.Relieve(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := h.s.Stats(); st.Closed[offsets.ReasonPressure] != 1 {
		t.Fatalf("closed %v: want one file closed under pressure", st.Closed)
	}
	h.eventually("the budget below its low watermark", b.MemoryLow)
}

// betweenWatermarks is a sink with two open files whose encoders take its
// budget between the watermarks (4.25 units of 5: high 4.5, low 3.5),
// with a third file's no longer fitting under the limit.
func betweenWatermarks(t *testing.T) (*harness, *budget.Budget) {
	t.Helper()
	const fileMem = compressorMemory
	b := budget.New(5*fileMem, 0)
	b.Acquire(budget.FetchBuffers, 2*fileMem+fileMem/4)
	h := newHarness(t, withBudget(b), withConfig(func(c *sink.Config) { c.MaxOpenFiles = 10 }))
	if h.bucket.WriterMemory() != 0 {
		t.Skip("the local bucket reports writer memory; this test sizes the budget in compressor units")
	}
	h.write(recs("t", 0, 0, 2)...)
	h.write(recs("t", 1, 0, 2)...)
	if b.Over() || b.MemoryLow() {
		t.Fatalf("want the budget between its watermarks: %+v", b.Snapshot())
	}
	return h, b
}
