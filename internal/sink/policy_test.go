package sink_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// Records are encoded by their file's goroutine after Write returns
// (docs/design.md, "The write pipeline"), so a record error is reported by
// a later Write or by the Flush that waits for the file.
func TestBadRecordToleranceNone(t *testing.T) {
	h := newHarness(t)
	err := h.s.Write(context.Background(), []*kgo.Record{rec("t", 0, 0), bad("t", 0, 1), rec("t", 0, 2)})
	if err == nil {
		err = h.s.Flush(context.Background(), nil, offsets.ReasonShutdown)
	}
	if err == nil {
		t.Fatal("Write accepted a record the format cannot encode")
	}
	if !errors.Is(err, format.ErrRecord) {
		t.Errorf("error %v does not wrap format.ErrRecord", err)
	}
	for _, want := range []string{"errors.tolerance", "offset 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if h.s.Err() == nil {
		t.Fatal("Err() is nil after a fatal record error")
	}
	if err := h.s.Write(context.Background(), recs("t", 0, 2, 3)); err == nil {
		t.Fatal("Write accepted records after a fatal record error")
	}
	if st := h.s.Stats(); st.Skipped != 0 || st.Stored != 0 {
		t.Fatalf("%+v", st)
	}
	// Whatever Flush does now, the bad record is never committable.
	_ = h.s.Flush(context.Background(), nil, offsets.ReasonShutdown)
	if off, ok := h.s.Committable(nil)[tp("t", 0)]; ok && off > 1 {
		t.Fatalf("committable %d passes the failed record at offset 1", off)
	}
}

func TestBadRecordToleranceAll(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.Policy.Tolerance = "all" }))
	h.write(rec("t", 0, 0), bad("t", 0, 1), rec("t", 0, 2))
	// Bad records at the start and end of a file.
	h.write(bad("t", 1, 0), rec("t", 1, 1), bad("t", 1, 2))
	h.flush()
	st := h.s.Stats()
	if st.Skipped != 3 || st.Records != 3 || st.DeadLettered != 0 {
		t.Fatalf("%+v, want 3 skipped, 3 written", st)
	}
	if h.s.Err() != nil {
		t.Fatal(h.s.Err())
	}
	want := map[offsets.TopicPartition]int64{tp("t", 0): 3, tp("t", 1): 3}
	if got := h.s.Committable(nil); !maps.Equal(got, want) {
		t.Fatalf("Committable = %v, want %v (past the skipped records)", got, want)
	}
	files := h.objects()
	got := h.offsets(files)
	if len(files) != 2 || !slices.Equal(got[tp("t", 0)], []int64{0, 2}) || !slices.Equal(got[tp("t", 1)], []int64{1}) {
		t.Fatalf("stored %v in %d files, want t/0: [0 2], t/1: [1]", got, len(files))
	}
}

func TestDeadLetter(t *testing.T) {
	type sent struct {
		r     *kgo.Record
		cause error
	}
	var mu sync.Mutex
	var dlq []sent
	h := newHarness(t, withConfig(func(c *sink.Config) {
		c.Policy.DeadLetter = func(_ context.Context, r *kgo.Record, cause error) error {
			mu.Lock()
			defer mu.Unlock()
			dlq = append(dlq, sent{r, cause})
			return nil
		}
	}))
	b := bad("t", 0, 1)
	h.write(rec("t", 0, 0), b, rec("t", 0, 2))
	h.flush()
	if len(dlq) != 1 || dlq[0].r != b || !errors.Is(dlq[0].cause, format.ErrRecord) {
		t.Fatalf("dead letters %+v, want the bad record with an ErrRecord cause", dlq)
	}
	if st := h.s.Stats(); st.DeadLettered != 1 || st.Records != 2 {
		t.Fatalf("%+v", st)
	}
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 3}) {
		t.Fatalf("Committable = %v", got)
	}
	if got := h.offsets(h.objects())[tp("t", 0)]; !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("stored %v", got)
	}
}

func TestDeadLetterFailureIsFatal(t *testing.T) {
	dlqErr := errors.New("dlq unavailable")
	h := newHarness(t, withConfig(func(c *sink.Config) {
		c.Policy.Tolerance = "all" // a failing dead-letter topic is not skipped
		c.Policy.DeadLetter = func(context.Context, *kgo.Record, error) error { return dlqErr }
	}))
	err := h.s.Write(context.Background(), []*kgo.Record{rec("t", 0, 0), bad("t", 0, 1)})
	if err == nil {
		err = h.s.Flush(context.Background(), nil, offsets.ReasonShutdown)
	}
	if !errors.Is(err, dlqErr) || !strings.Contains(err.Error(), "dead-letter") {
		t.Fatalf("Write = %v, want the dead-letter error", err)
	}
	if h.s.Err() == nil {
		t.Fatal("sink not failed")
	}
	_ = h.s.Flush(context.Background(), nil, offsets.ReasonShutdown)
	if off, ok := h.s.Committable(nil)[tp("t", 0)]; ok && off > 1 {
		t.Fatalf("committable %d passes the record that was neither stored nor dead-lettered", off)
	}
}

func TestNullValues(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		h := newHarness(t)
		h.write(rec("t", 0, 0), null("t", 0, 1))
		h.flush()
		files := h.objects()
		if len(files) != 1 || len(files[0].lines) != 2 || string(files[0].lines[1].Value) != "null" {
			t.Fatalf("files %+v, want the tombstone written with value null", files)
		}
		if st := h.s.Stats(); st.Records != 2 || st.Skipped != 0 {
			t.Fatalf("%+v", st)
		}
	})

	t.Run("ignore", func(t *testing.T) {
		h := newHarness(t, withConfig(func(c *sink.Config) { c.NullValues = "ignore" }))
		// With no file open, an ignored record is committable at once.
		h.write(null("t", 0, 0), null("t", 0, 1))
		if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 2}) {
			t.Fatalf("Committable = %v, want 2 before any Flush: nothing needs storing", got)
		}
		h.write(rec("t", 0, 2), null("t", 0, 3), rec("t", 0, 4), null("t", 0, 5))
		if got := h.s.Committable(nil); len(got) != 0 {
			t.Fatalf("Committable = %v with records 2 and 4 open", got)
		}
		h.flush()
		if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 6}) {
			t.Fatalf("Committable = %v, want 6", got)
		}
		if got := h.offsets(h.objects())[tp("t", 0)]; !slices.Equal(got, []int64{2, 4}) {
			t.Fatalf("stored %v, want [2 4]", got)
		}
		if st := h.s.Stats(); st.Skipped != 4 || st.Records != 2 {
			t.Fatalf("%+v", st)
		}
	})

	t.Run("fail", func(t *testing.T) {
		h := newHarness(t, withConfig(func(c *sink.Config) { c.NullValues = "fail" }))
		err := h.s.Write(context.Background(), []*kgo.Record{rec("t", 0, 0), null("t", 0, 1)})
		if err == nil {
			t.Fatal("Write accepted a null value with null_values fail")
		}
		for _, want := range []string{"errors.null_values", "errors.tolerance"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %s", err, want)
			}
		}
		if h.s.Err() == nil {
			t.Fatal("sink not failed")
		}
	})

	t.Run("fail with tolerance all", func(t *testing.T) {
		h := newHarness(t, withConfig(func(c *sink.Config) { c.NullValues = "fail"; c.Policy.Tolerance = "all" }))
		h.write(rec("t", 0, 0), null("t", 0, 1), rec("t", 0, 2))
		h.flush()
		if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 3}) {
			t.Fatalf("Committable = %v", got)
		}
		if st := h.s.Stats(); st.Skipped != 1 {
			t.Fatalf("%+v", st)
		}
	})

	t.Run("fail with dead letter", func(t *testing.T) {
		var got []*kgo.Record
		h := newHarness(t, withConfig(func(c *sink.Config) {
			c.NullValues = "fail"
			c.Policy.DeadLetter = func(_ context.Context, r *kgo.Record, _ error) error { got = append(got, r); return nil }
		}))
		n := null("t", 0, 0)
		h.write(n, rec("t", 0, 1))
		if len(got) != 1 || got[0] != n {
			t.Fatalf("dead letters %v", got)
		}
		h.flush()
		if c := h.s.Committable(nil); !maps.Equal(c, map[offsets.TopicPartition]int64{tp("t", 0): 2}) {
			t.Fatalf("Committable = %v", c)
		}
	})
}

// A skipped record between two files: its offset is committable only once
// the file before it is.
func TestSkippedBetweenFiles(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxRecords = 2; c.NullValues = "ignore" }))
	h.write(recs("t", 0, 0, 2)...) // file [0,2) closed by records
	h.write(null("t", 0, 2))       // no file open: skipped at once
	h.write(recs("t", 0, 3, 5)...) // file [3,5)
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 5}) {
		t.Fatalf("Committable = %v", got)
	}
	files := h.objects()
	if len(files) != 2 || files[1].start != 3 {
		t.Fatalf("files %+v", files)
	}
}

// A file whose every record was skipped stores nothing, and its offsets
// still become committable.
func TestAllSkippedFileStoresNothing(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.Policy.Tolerance = "all" }))
	h.write(bad("t", 0, 0), bad("t", 0, 1))
	h.flush()
	if got, want := h.s.Committable(nil), map[offsets.TopicPartition]int64{tp("t", 0): 2}; !maps.Equal(got, want) {
		t.Fatalf("Committable = %v, want %v", got, want)
	}
	if files := h.objects(); len(files) != 0 {
		t.Fatalf("stored %d objects for a file of skipped records, want none", len(files))
	}
	if st := h.s.Stats(); st.Skipped != 2 || st.FilesUploaded != 0 {
		t.Fatalf("%+v, want 2 skipped and no upload", st)
	}
}

// A record the file's goroutine finds it can't encode, after Write routed
// it to the file, is taken back from the file: the file's ledger entry
// claims only the offsets it holds, and the bad record's offset is in the
// handled state all the same (docs/design.md, "The write pipeline").
func TestBadRecordLeavesTheFilesLedgerEntry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bucket, err := storage.Open(ctx, "file://"+dir, storage.Options{PartSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	cfg := baseConfig(t)
	cfg.Policy.Tolerance = "all"
	cfg.Ledger = ledger.New(bucket, "")
	s := sink.New(cfg, sink.FromStorage(bucket), budget.New(1<<30, 0), slog.New(slog.DiscardHandler))
	t.Cleanup(s.Close)
	id := ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0}
	s.Assign(tp("t", 0), id, ledger.Point{State: offsets.State{Next: 0}})
	if err := s.Write(ctx, []*kgo.Record{rec("t", 0, 0), bad("t", 0, 1), rec("t", 0, 2)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	e, err := cfg.Ledger.Last(ctx, id)
	if err != nil || e == nil {
		t.Fatalf("last entry: %v, %v", e, err)
	}
	if want := (offsets.Ranges{{0, 1}, {2, 3}}); !slices.Equal(e.File.Ranges, want) || e.File.Records != 2 {
		t.Errorf("entry claims %v (%d records), want %v (2)", e.File.Ranges, e.File.Records, want)
	}
	if after := e.After(); after.Next != 3 {
		t.Errorf("after the entry, %+v is handled, want everything below 3", after)
	}
}
