package sink_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

func withFaults(f *storage.Faults) opt {
	return func(_ *harness, _ *sink.Config, o *storage.Options) { o.Faults = f }
}

// A record larger than the whole budget goes to storage piece by piece:
// while storage takes nothing, writing it stops once the budget is over its
// limit, instead of queuing the whole record, and goes on as storage takes
// the pieces. The budget then never holds much more than its limit.
func TestLargeRecordWaitsForStorage(t *testing.T) {
	const limit = 4 << 20
	b := budget.New(limit, 0)
	faults := &storage.Faults{}
	h := newHarness(t, withBudget(b), withAccounting(), withFaults(faults))
	big := rec("t", 0, 0)
	big.Value = bytes.Repeat([]byte("a \"large\" text value\n"), (12<<20)/21)

	faults.Stall()
	done := make(chan error, 1)
	go func() { _, err := h.s.WriteSome(context.Background(), []*kgo.Record{big}); done <- err }()
	h.eventually("the record to take the budget over its limit", b.OverLimit)
	select {
	case err := <-done:
		t.Fatalf("WriteSome returned (%v) while storage took nothing: the record was queued whole, %d bytes held against a limit of %d",
			err, b.Snapshot().Used, limit)
	case <-time.After(100 * time.Millisecond):
	}
	if used := b.Snapshot().Used; used > limit+1<<20 {
		t.Errorf("%d bytes held against a limit of %d while storage took nothing", used, limit)
	}
	faults.Resume()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("WriteSome still waits after storage resumed")
	}
	h.flush()
	if peak := b.Snapshot().Peak; peak > limit+1<<20 {
		t.Errorf("budget peak %d, want at most its limit %d and a piece", peak, limit)
	}
	files := h.objects()
	if len(files) != 1 || len(files[0].lines) != 1 {
		t.Fatalf("stored %+v, want one file of one record", files)
	}
}

// A write waiting for storage stops waiting when its context ends (the
// stop's deadline): the rest of the record is queued, and the file stays
// whole, to be stored once storage takes it, or abandoned.
func TestLargeRecordWaitEndsWithContext(t *testing.T) {
	b := budget.New(4<<20, 0)
	faults := &storage.Faults{}
	h := newHarness(t, withBudget(b), withAccounting(), withFaults(faults))
	big := rec("t", 0, 0)
	big.Value = bytes.Repeat([]byte("x"), 12<<20)
	faults.Stall()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := h.s.WriteSome(ctx, []*kgo.Record{big}); done <- err }()
	h.eventually("the record to take the budget over its limit", b.OverLimit)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WriteSome = %v, want the record written", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("WriteSome still waits after its context ended")
	}
	if used := b.Snapshot().Used; used < 12<<20 {
		t.Errorf("%d bytes held: the rest of the record should be queued", used)
	}
	faults.Resume()
	h.flush()
	if files := h.objects(); len(files) != 1 || len(files[0].lines) != 1 {
		t.Fatalf("stored %+v, want one file of one record", files)
	}
}
