package sink

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"
)

var (
	tpA = TopicPartition{"a", 0}
	tpB = TopicPartition{"b", 1}
)

func wantCommits(t *testing.T, tr *tracker, only map[TopicPartition]bool, want map[TopicPartition]int64) {
	t.Helper()
	if got := tr.committable(only); !maps.Equal(got, want) {
		t.Fatalf("committable(%v) = %v, want %v", only, got, want)
	}
}

func TestTrackerDurablePrefix(t *testing.T) {
	tr := newTracker()
	wantCommits(t, tr, nil, map[TopicPartition]int64{})

	s1 := tr.open(tpA, 10)
	wantCommits(t, tr, nil, map[TopicPartition]int64{}) // open, unfinished
	tr.finish(s1, 15)
	s2 := tr.open(tpA, 15)
	tr.finish(s2, 20)
	s3 := tr.open(tpA, 20)

	// A later segment durable first: nothing passes the first one.
	tr.markDurable(s2)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})

	tr.markDurable(s1)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 20})
	// Popped: nothing new until s3.
	wantCommits(t, tr, nil, map[TopicPartition]int64{})

	tr.finish(s3, 21)
	tr.markDurable(s3)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 21})
	if len(tr.parts[tpA]) != 0 {
		t.Fatalf("%d segments kept after all were popped", len(tr.parts[tpA]))
	}
}

func TestTrackerSkipped(t *testing.T) {
	tr := newTracker()
	// With nothing in front, a skipped run is committable at once.
	tr.skipped(tpA, 0, 3)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 3})

	// Behind a pending segment, it waits.
	s := tr.open(tpA, 3)
	tr.finish(s, 5)
	tr.skipped(tpA, 5, 6)
	tr.skipped(tpA, 6, 7)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	tr.markDurable(s)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 7})

	// Skipped then pending: the skip is committable, the file is not.
	tr.skipped(tpA, 7, 8)
	s = tr.open(tpA, 8)
	tr.finish(s, 9)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 8})
	if !pendingOf(tr, map[TopicPartition]bool{tpA: true}) {
		t.Fatal("pending = false with a segment not durable")
	}
}

func TestTrackerPartitionsAreIndependent(t *testing.T) {
	tr := newTracker()
	a := tr.open(tpA, 0)
	b := tr.open(tpB, 100)
	tr.finish(a, 5)
	tr.finish(b, 105)
	tr.markDurable(b)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpB: 105})
	tr.markDurable(a)
	// only limits what is popped; the rest stays for later.
	wantCommits(t, tr, map[TopicPartition]bool{tpB: true}, map[TopicPartition]int64{})
	wantCommits(t, tr, map[TopicPartition]bool{tpA: true}, map[TopicPartition]int64{tpA: 5})
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
}

func TestTrackerDrop(t *testing.T) {
	tr := newTracker()
	a := tr.open(tpA, 0)
	tr.finish(a, 5)
	tr.skipped(tpB, 0, 1)
	tr.drop(map[TopicPartition]bool{tpA: true, tpB: true})
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	if pendingOf(tr, map[TopicPartition]bool{tpA: true}) {
		t.Fatal("pending after drop")
	}
	// An upload of a dropped segment that finishes later changes nothing.
	tr.markDurable(a)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	// The partition can come back.
	s := tr.open(tpA, 0)
	tr.finish(s, 2)
	tr.markDurable(s)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 2})
}

func TestTrackerWake(t *testing.T) {
	tr := newTracker()
	w := tr.Wake()
	select {
	case <-w:
		t.Fatal("Wake closed with nothing durable")
	default:
	}
	s := tr.open(tpA, 0)
	tr.finish(s, 1)
	select {
	case <-w:
		t.Fatal("Wake closed by open/finish")
	default:
	}
	tr.markDurable(s)
	select {
	case <-w:
	default:
		t.Fatal("Wake not closed by markDurable")
	}
	w2 := tr.Wake()
	if w2 == w {
		t.Fatal("Wake returned the closed channel again")
	}
	tr.skipped(tpA, 1, 2)
	select {
	case <-w2:
	default:
		t.Fatal("Wake not closed by skipped")
	}
}

func TestTrackerWaitDurable(t *testing.T) {
	tr := newTracker()
	ctx := context.Background()
	only := map[TopicPartition]bool{tpA: true}

	// Nothing pending: returns at once.
	if err := tr.waitDurable(ctx, tr.segments(only)); err != nil {
		t.Fatal(err)
	}

	s1 := tr.open(tpA, 0)
	tr.finish(s1, 5)
	s2 := tr.open(tpA, 5)
	tr.finish(s2, 10)
	other := tr.open(tpB, 0) // never durable: must not matter

	done := make(chan error, 1)
	go func() { done <- tr.waitDurable(ctx, tr.segments(only)) }()
	tr.markDurable(s2)
	select {
	case err := <-done:
		t.Fatalf("waitDurable returned (%v) with s1 pending", err)
	case <-time.After(20 * time.Millisecond):
	}
	tr.markDurable(s1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitDurable did not return once all segments were durable")
	}
	_ = other

	// Cancelled while waiting.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- tr.waitDurable(cctx, tr.segments(map[TopicPartition]bool{tpB: true})) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("waitDurable = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitDurable ignored its ctx")
	}
}

// committable and markDurable from different goroutines, as the committer
// and the upload workers call them.
func TestTrackerConcurrent(t *testing.T) {
	tr := newTracker()
	const n = 500
	segs := make(chan *segment, n)
	go func() {
		for i := int64(0); i < n; i++ {
			s := tr.open(tpA, i)
			tr.finish(s, i+1)
			segs <- s
		}
		close(segs)
	}()
	go func() {
		for s := range segs {
			tr.markDurable(s)
		}
	}()
	var last int64
	deadline := time.After(10 * time.Second)
	for last < n {
		w := tr.Wake()
		if off, ok := tr.committable(nil)[tpA]; ok {
			if off <= last {
				t.Fatalf("committable went from %d to %d", last, off)
			}
			last = off
			continue
		}
		select {
		case <-w:
		case <-deadline:
			t.Fatalf("stuck at %d", last)
		}
	}
}

// pendingOf reports whether any current segment of tps is not durable.
func pendingOf(tr *tracker, tps map[TopicPartition]bool) bool {
	p, _ := tr.pending(tr.segments(tps))
	return p
}
