package offsets

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var (
	tpA = TopicPartition{"a", 0}
	tpB = TopicPartition{"b", 1}
)

// long bounds waits for what the test itself makes happen: only a broken
// tracker reaches it.
const long = 2 * time.Minute

func wantCommits(t *testing.T, tr *Tracker, only map[TopicPartition]bool, want map[TopicPartition]int64) {
	t.Helper()
	if got := tr.Committable(only); !maps.Equal(got, want) {
		t.Fatalf("committable(%v) = %v, want %v", only, got, want)
	}
}

func wantState(t *testing.T, tr *Tracker, tp TopicPartition, next int64, above Ranges) {
	t.Helper()
	if got := tr.State(tp); got.Next != next || !slices.Equal(got.Above, above) {
		t.Fatalf("state(%v) = %+v, want next %d above %v", tp, got, next, above)
	}
}

// wantHandled is wantState for a state that may list, in Above, a known
// run that routing has partly passed: folded, it must be next and above.
func wantHandled(t *testing.T, tr *Tracker, tp TopicPartition, next int64, above Ranges) {
	t.Helper()
	st := tr.State(tp)
	if err := st.Above.Valid(); err != nil {
		t.Fatalf("state(%v) = %+v: %v", tp, st, err)
	}
	if got := (State{Next: st.Next}).With(st.Above); got.Next != next || !slices.Equal(got.Above, above) {
		t.Fatalf("state(%v) = %+v, folded %+v, want next %d above %v", tp, st, got, next, above)
	}
}

func wantUnitRanges(t *testing.T, tr *Tracker, name string, u *Unit, want Ranges) {
	t.Helper()
	if got := tr.Ranges(u); !slices.Equal(got, want) {
		t.Fatalf("ranges(%s) = %v, want %v", name, got, want)
	}
}

// routeNew routes offsets that are new to the tracker.
func routeNew(t *testing.T, tr *Tracker, tp TopicPartition, u *Unit, offs ...int64) {
	t.Helper()
	for _, o := range offs {
		if !tr.Route(tp, o, u) {
			t.Fatalf("route(%v, %d) = false for a new offset", tp, o)
		}
	}
}

// routeKnown routes offsets the tracker must refuse as handled already.
func routeKnown(t *testing.T, tr *Tracker, tp TopicPartition, u *Unit, offs ...int64) {
	t.Helper()
	for _, o := range offs {
		if tr.Route(tp, o, u) {
			t.Fatalf("route(%v, %d) = true for an offset handled already", tp, o)
		}
	}
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestTrackerDurablePrefix(t *testing.T) {
	tr := NewTracker()
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 0, nil)

	u1, u2, u3 := &Unit{}, &Unit{}, &Unit{}
	routeNew(t, tr, tpA, u1, span(10, 15)...)
	routeNew(t, tr, tpA, u2, span(15, 20)...)
	routeNew(t, tr, tpA, u3, 20)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 10, nil)

	// A later file durable first: nothing passes the first one.
	tr.MarkDurable(u2)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 10, Ranges{{15, 20}})

	tr.MarkDurable(u1)
	wantState(t, tr, tpA, 20, nil)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 20})
	// Popped: nothing new until u3.
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 20, nil)

	tr.MarkDurable(u3)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 21})
	if n := len(tr.parts[tpA].pieces); n != 0 {
		t.Fatalf("%d pieces kept after all were popped", n)
	}
	wantUnitRanges(t, tr, "u1", u1, Ranges{{10, 15}})
	wantUnitRanges(t, tr, "u2", u2, Ranges{{15, 20}})
	wantUnitRanges(t, tr, "u3", u3, Ranges{{20, 21}})

	// Offsets with no record go with the record that follows them.
	u4 := &Unit{}
	routeNew(t, tr, tpA, u4, 23, 30)
	wantUnitRanges(t, tr, "u4", u4, Ranges{{21, 31}})
	tr.MarkDurable(u4)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 31})
}

func TestTrackerPartitionsAreIndependent(t *testing.T) {
	tr := NewTracker()
	a, b := &Unit{}, &Unit{}
	routeNew(t, tr, tpA, a, span(0, 5)...)
	routeNew(t, tr, tpB, b, span(100, 105)...)
	tr.MarkDurable(b)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpB: 105})
	tr.MarkDurable(a)
	// only limits what is popped; the rest stays for later.
	wantCommits(t, tr, map[TopicPartition]bool{tpB: true}, map[TopicPartition]int64{})
	wantCommits(t, tr, map[TopicPartition]bool{tpA: true}, map[TopicPartition]int64{tpA: 5})
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
}

// Records of one partition alternate between files, as with an event-time
// or key template.
func TestTrackerInterleavedUnits(t *testing.T) {
	tr := NewTracker()
	u1, u2, u3 := &Unit{}, &Unit{}, &Unit{}
	routeNew(t, tr, tpA, u1, 0)
	routeNew(t, tr, tpA, u2, 1)
	routeNew(t, tr, tpA, u1, 2)
	routeNew(t, tr, tpA, u2, 3)
	routeNew(t, tr, tpA, u1, 6) // 4 and 5 have no record: they go with 6
	routeNew(t, tr, tpA, u2, 7, 8)
	wantUnitRanges(t, tr, "u1", u1, Ranges{{0, 1}, {2, 3}, {4, 7}})
	wantUnitRanges(t, tr, "u2", u2, Ranges{{1, 2}, {3, 4}, {7, 9}})
	wantState(t, tr, tpA, 0, nil)

	// The second file is durable first: its runs are handled, above Next,
	// and nothing is committable while the first file's offset 0 is not.
	tr.MarkDurable(u2)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 0, Ranges{{1, 2}, {3, 4}, {7, 9}})

	routeNew(t, tr, tpA, u3, 9, 10)
	routeNew(t, tr, tpA, u1, 11)
	wantState(t, tr, tpA, 0, Ranges{{1, 2}, {3, 4}, {7, 9}})

	// The first file durable: the prefix runs up to u3, the first piece
	// not durable, although u1 has offset 11 above it.
	tr.MarkDurable(u1)
	wantState(t, tr, tpA, 9, Ranges{{11, 12}})
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 9})
	wantState(t, tr, tpA, 9, Ranges{{11, 12}})
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantUnitRanges(t, tr, "u1", u1, Ranges{{0, 1}, {2, 3}, {4, 7}, {11, 12}})

	tr.MarkDurable(u3)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 12})
	wantState(t, tr, tpA, 12, nil)
}

// Records the error policy skips are handled without a file (nil unit).
func TestTrackerSkipped(t *testing.T) {
	tr := NewTracker()
	// With nothing in front, a skipped record is committable at once.
	w := tr.Wake()
	routeNew(t, tr, tpA, nil, 0)
	if !closed(w) {
		t.Fatal("Wake not closed by a skipped record")
	}
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 1})

	// Behind a pending file, it waits.
	u1, u2 := &Unit{}, &Unit{}
	routeNew(t, tr, tpA, u1, 1)
	routeNew(t, tr, tpA, nil, 2, 3)
	routeNew(t, tr, tpA, u2, 4)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 1, Ranges{{2, 4}})
	wantUnitRanges(t, tr, "u1", u1, Ranges{{1, 2}})

	tr.MarkDurable(u1)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 4})

	// A skipped record after a gap takes the gap: offsets 5 and 6 have no
	// record.
	routeNew(t, tr, tpA, nil, 7)
	wantState(t, tr, tpA, 4, Ranges{{5, 8}})
	if got := tr.PendingUnits(map[TopicPartition]bool{tpA: true}); !slices.Equal(got, []*Unit{u2}) {
		t.Fatalf("pendingUnits = %v, want [u2]", got)
	}
	tr.MarkDurable(u2)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 8})
}

// assign with the state resume found: offsets below Next and in Above are
// stored already.
func TestTrackerAssignResumed(t *testing.T) {
	tr := NewTracker()
	tr.Assign(tpA, State{Next: 10, Above: Ranges{{12, 14}, {20, 22}, {30, 31}}})
	wantState(t, tr, tpA, 10, Ranges{{12, 14}, {20, 22}, {30, 31}})
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	for o, want := range map[int64]bool{0: true, 9: true, 10: false, 11: false, 12: true, 13: true, 14: false, 19: false, 20: true, 21: true, 22: false, 30: true, 31: false} {
		if got := tr.Has(tpA, o); got != want {
			t.Errorf("has(%d) = %v, want %v", o, got, want)
		}
	}

	u1, u2 := &Unit{}, &Unit{}
	routeKnown(t, tr, tpA, u1, 9) // below Next: delivered again
	routeNew(t, tr, tpA, u1, 10)
	// Offset 11 has no record; 12 and 13 are stored already (the sink
	// routes them to nil once has says so). Whatever the unit, they are not
	// its.
	routeKnown(t, tr, tpA, u1, 12)
	routeKnown(t, tr, tpA, nil, 13)
	routeNew(t, tr, tpA, u2, 14)
	routeNew(t, tr, tpA, u1, 17) // 15 and 16 have no record
	// 18 to 21 have no record any more (compacted): passing the known run
	// [20, 22) hands it, and the gap before it, to nil.
	routeNew(t, tr, tpA, u2, 25)
	wantUnitRanges(t, tr, "u1", u1, Ranges{{10, 11}, {15, 18}})
	wantUnitRanges(t, tr, "u2", u2, Ranges{{14, 15}, {22, 26}})
	for _, o := range []int64{11, 19, 21, 25} {
		if !tr.Has(tpA, o) {
			t.Errorf("has(%d) = false below the cursor", o)
		}
	}
	if tr.Has(tpA, 26) || !tr.Has(tpA, 30) {
		t.Errorf("has(26), has(30) = %v, %v; want false, true", tr.Has(tpA, 26), tr.Has(tpA, 30))
	}
	// The state carries the known runs not reached yet.
	wantState(t, tr, tpA, 10, Ranges{{11, 14}, {18, 22}, {30, 31}})
	wantCommits(t, tr, nil, map[TopicPartition]int64{})

	tr.MarkDurable(u1)
	wantState(t, tr, tpA, 14, Ranges{{15, 22}, {30, 31}})
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 14})
	tr.MarkDurable(u2)
	wantState(t, tr, tpA, 26, Ranges{{30, 31}})
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 26})

	// The last known record comes: it and the gap before it are handled.
	routeKnown(t, tr, tpA, nil, 30)
	wantHandled(t, tr, tpA, 31, nil)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 31})
	routeNew(t, tr, tpA, nil, 31)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 32})
}

// A known run only partly delivered: the state still holds every offset
// of it.
func TestTrackerAssignKnownRunPartlyPassed(t *testing.T) {
	tr := NewTracker()
	tr.Assign(tpA, State{Next: 0, Above: Ranges{{2, 6}}})
	u1 := &Unit{}
	routeNew(t, tr, tpA, u1, 0)
	routeNew(t, tr, tpA, nil, 1)
	routeKnown(t, tr, tpA, nil, 2, 3)
	tr.MarkDurable(u1)
	st := tr.State(tpA)
	for o := int64(0); o < 8; o++ {
		if want := o < 6; st.Handled(o) != want {
			t.Fatalf("state = %+v: Handled(%d) = %v", st, o, !want)
		}
	}
	if err := st.Above.Valid(); err != nil {
		t.Fatalf("state = %+v: %v", st, err)
	}
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 4})
	routeKnown(t, tr, tpA, nil, 4, 5)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 6})
	wantHandled(t, tr, tpA, 6, nil)
}

// The state of a partition whose known run was reached is folded, as
// State.With makes it: a ledger entry's before is then the previous
// entry's After().
func TestTrackerStateCanonical(t *testing.T) {
	tr := NewTracker()
	tr.Assign(tpA, State{Next: 10, Above: Ranges{{12, 13}}})
	u := &Unit{}
	routeNew(t, tr, tpA, u, 10)
	tr.MarkDurable(u)
	routeKnown(t, tr, tpA, nil, 12)
	wantState(t, tr, tpA, 13, nil)
}

func TestTrackerAssignUnknown(t *testing.T) {
	tr := NewTracker()
	// Nothing known: the partition starts at its first record.
	tr.Assign(tpA, State{Next: -1})
	if tr.Has(tpA, 0) || tr.Has(tpA, 1000) {
		t.Fatal("has = true with nothing known")
	}
	u := &Unit{}
	routeNew(t, tr, tpA, u, 100)
	wantUnitRanges(t, tr, "u", u, Ranges{{100, 101}})
	tr.MarkDurable(u)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 101})

	// Assigned again (after a drop), with nothing known: what was tracked
	// is forgotten.
	routeNew(t, tr, tpA, &Unit{}, 101)
	tr.Assign(tpA, State{Next: -1})
	if tr.Has(tpA, 100) {
		t.Fatal("has(100) = true after assign forgot the partition")
	}
	wantState(t, tr, tpA, 0, nil)
	u2 := &Unit{}
	routeNew(t, tr, tpA, u2, 50)
	tr.MarkDurable(u2)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 51})

	// And with a state: it replaces what was tracked.
	tr.Assign(tpA, State{Next: 500})
	wantState(t, tr, tpA, 500, nil)
	if !tr.Has(tpA, 499) || tr.Has(tpA, 500) {
		t.Fatal("has around Next wrong after assign")
	}
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	u3 := &Unit{}
	routeNew(t, tr, tpA, u3, 502)
	wantUnitRanges(t, tr, "u3", u3, Ranges{{500, 503}})
}

// A record delivered twice (a fetch retried) is refused, whatever unit it
// would go to, and changes nothing.
func TestTrackerDuplicate(t *testing.T) {
	tr := NewTracker()
	u1, u2 := &Unit{}, &Unit{}
	routeNew(t, tr, tpA, u1, 5, 6)
	routeKnown(t, tr, tpA, u2, 5, 6)
	routeKnown(t, tr, tpA, nil, 5, 6)
	routeKnown(t, tr, tpA, u2, 3) // below the first offset
	wantUnitRanges(t, tr, "u1", u1, Ranges{{5, 7}})
	wantUnitRanges(t, tr, "u2", u2, nil)
	if got := tr.PendingUnits(map[TopicPartition]bool{tpA: true}); !slices.Equal(got, []*Unit{u1}) {
		t.Fatalf("pendingUnits = %v, want [u1]", got)
	}
	if !tr.Has(tpA, 5) || !tr.Has(tpA, 6) || tr.Has(tpA, 7) {
		t.Fatal("has(5), has(6), has(7) wrong")
	}
	tr.MarkDurable(u1)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 7})
	// After the pop too.
	routeKnown(t, tr, tpA, u2, 6)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 7, nil)
}

func TestTrackerPendingUnits(t *testing.T) {
	tr := NewTracker()
	only := map[TopicPartition]bool{tpA: true}
	if got := tr.PendingUnits(only); len(got) != 0 {
		t.Fatalf("pendingUnits with nothing routed = %v", got)
	}
	u1, u2, u3, ub := &Unit{}, &Unit{}, &Unit{}, &Unit{}
	routeNew(t, tr, tpA, u1, 0)
	routeNew(t, tr, tpA, u2, 1)
	routeNew(t, tr, tpA, u1, 2)
	routeNew(t, tr, tpA, nil, 3)
	routeNew(t, tr, tpA, u3, 4)
	routeNew(t, tr, tpB, ub, 0)
	set := func(us []*Unit) map[*Unit]bool {
		m := map[*Unit]bool{}
		for _, u := range us {
			if m[u] {
				t.Fatalf("unit %p twice in %v", u, us)
			}
			m[u] = true
		}
		return m
	}
	if got := set(tr.PendingUnits(only)); !maps.Equal(got, map[*Unit]bool{u1: true, u2: true, u3: true}) {
		t.Fatalf("pendingUnits(a) = %v", got)
	}
	if got := set(tr.PendingUnits(map[TopicPartition]bool{tpA: true, tpB: true})); len(got) != 4 {
		t.Fatalf("pendingUnits(a, b) = %v", got)
	}
	if got := tr.PendingUnits(nil); len(got) != 0 {
		t.Fatalf("pendingUnits(nil) = %v", got)
	}
	tr.MarkDurable(u2)
	if got := set(tr.PendingUnits(only)); !maps.Equal(got, map[*Unit]bool{u1: true, u3: true}) {
		t.Fatalf("pendingUnits(a) with u2 durable = %v", got)
	}
	tr.MarkDurable(u1)
	tr.Committable(nil)
	if got := tr.PendingUnits(only); !slices.Equal(got, []*Unit{u3}) {
		t.Fatalf("pendingUnits(a) after a pop = %v", got)
	}
}

func TestTrackerWaitDurable(t *testing.T) {
	ctx := context.Background()
	tr := NewTracker()
	only := map[TopicPartition]bool{tpA: true}
	// Nothing pending: returns at once.
	if err := tr.WaitDurable(ctx, tr.PendingUnits(only)); err != nil {
		t.Fatal(err)
	}
	u1, u2, other := &Unit{}, &Unit{}, &Unit{}
	routeNew(t, tr, tpA, u1, 0)
	routeNew(t, tr, tpA, u2, 1)
	routeNew(t, tr, tpB, other, 0) // never durable: must not matter
	us := tr.PendingUnits(only)
	done := make(chan error, 1)
	go func() { done <- tr.WaitDurable(ctx, us) }()
	tr.MarkDurable(u2)
	if p, err := tr.pending(us); !p || err != nil {
		t.Fatalf("pending = %v, %v with u1 not durable", p, err)
	}
	tr.MarkDurable(u1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(long):
		t.Fatal("waitDurable did not return once all units were durable")
	}

	// Cancelled while waiting.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- tr.WaitDurable(cctx, []*Unit{other}) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("waitDurable = %v, want context.Canceled", err)
		}
	case <-time.After(long):
		t.Fatal("waitDurable ignored its ctx")
	}
}

// drop abandons the partition's files: a Flush waiting on them returns,
// and their offsets are never committed.
func TestTrackerDrop(t *testing.T) {
	ctx := context.Background()
	tr := NewTracker()
	u1, u2, done1, ub := &Unit{}, &Unit{}, &Unit{}, &Unit{}
	routeNew(t, tr, tpA, done1, 0)
	tr.MarkDurable(done1)
	routeNew(t, tr, tpA, u1, 1, 2)
	routeNew(t, tr, tpA, u2, 3)
	routeNew(t, tr, tpA, nil, 4)
	routeNew(t, tr, tpB, ub, 0)
	us := tr.PendingUnits(map[TopicPartition]bool{tpA: true})
	if p, _ := tr.pending(us); !p {
		t.Fatal("pending = false before the drop")
	}
	done := make(chan error, 1)
	go func() { done <- tr.WaitDurable(ctx, us) }()
	w := tr.Wake()
	tr.Drop(map[TopicPartition]bool{tpA: true})
	if !closed(w) {
		t.Fatal("Wake not closed by drop")
	}
	if p, err := tr.pending(us); p || err != nil {
		t.Fatalf("pending = %v, %v after the drop", p, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(long):
		t.Fatal("waitDurable did not return after the partition was dropped")
	}
	if !u1.abandoned || !u2.abandoned || done1.abandoned || ub.abandoned {
		t.Fatalf("abandoned: u1 %v u2 %v durable %v other partition %v; want true true false false", u1.abandoned, u2.abandoned, done1.abandoned, ub.abandoned)
	}
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	// An upload of a dropped file that ends later changes nothing.
	tr.MarkDurable(u1)
	tr.MarkDurable(u2)
	wantCommits(t, tr, nil, map[TopicPartition]int64{})
	wantState(t, tr, tpA, 0, nil)
	if tr.Has(tpA, 1) {
		t.Fatal("has(1) = true after the drop")
	}
	// The other partition goes on.
	tr.MarkDurable(ub)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpB: 1})
	// The partition can come back.
	u3 := &Unit{}
	routeNew(t, tr, tpA, u3, 1, 2)
	tr.MarkDurable(u3)
	wantCommits(t, tr, nil, map[TopicPartition]int64{tpA: 3})
}

func TestTrackerFail(t *testing.T) {
	ctx := context.Background()
	tr := NewTracker()
	u := &Unit{}
	routeNew(t, tr, tpA, u, 0)
	done := make(chan error, 1)
	go func() { done <- tr.WaitDurable(ctx, []*Unit{u}) }()
	w := tr.Wake()
	first := errors.New("upload failed")
	tr.Fail(first)
	if !closed(w) {
		t.Fatal("Wake not closed by fail")
	}
	if _, err := tr.pending([]*Unit{u}); !errors.Is(err, first) {
		t.Fatalf("pending after fail = %v, want %v", err, first)
	}
	select {
	case err := <-done:
		if !errors.Is(err, first) {
			t.Fatalf("waitDurable = %v, want %v", err, first)
		}
	case <-time.After(long):
		t.Fatal("waitDurable did not return after fail")
	}
	// The first error stays; waiting on anything is pointless now.
	tr.Fail(errors.New("later"))
	if err := tr.WaitDurable(ctx, nil); !errors.Is(err, first) {
		t.Fatalf("waitDurable after fail = %v, want %v", err, first)
	}
	if _, err := tr.pending([]*Unit{u}); !errors.Is(err, first) {
		t.Fatalf("pending after fail = %v, want %v", err, first)
	}
}

func TestTrackerWake(t *testing.T) {
	tr := NewTracker()
	w := tr.Wake()
	u := &Unit{}
	tr.Assign(tpA, State{Next: 0})
	routeNew(t, tr, tpA, u, 0)
	tr.Committable(nil)
	tr.State(tpA)
	if closed(w) {
		t.Fatal("Wake closed by assign, route to a file, committable or state")
	}
	tr.MarkDurable(u)
	if !closed(w) {
		t.Fatal("Wake not closed by markDurable")
	}
	if w2 := tr.Wake(); w2 == w || closed(w2) {
		t.Fatal("Wake returned a closed channel after it was closed")
	}
}

// committable and markDurable from different goroutines, as the committer
// and the file goroutines call them, with records of two files
// interleaved.
func TestTrackerConcurrent(t *testing.T) {
	tr := NewTracker()
	const n = 2000
	units := make(chan *Unit, n)
	go func() {
		var open [2]*Unit
		for i := int64(0); i < n; i++ {
			k := i % 2
			if open[k] == nil {
				open[k] = &Unit{}
			}
			tr.Route(tpA, i, open[k])
			if i%10 >= 8 || i == n-1 || i == n-2 {
				units <- open[k]
				open[k] = nil
			}
		}
		close(units)
	}()
	go func() {
		for u := range units {
			tr.MarkDurable(u)
		}
	}()
	var last int64
	deadline := time.After(long)
	for last < n {
		w := tr.Wake()
		if off, ok := tr.Committable(nil)[tpA]; ok {
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
	if last != n {
		t.Fatalf("committed %d, want %d", last, n)
	}
}

// trackModel is what the tracker must hold, offset by offset.
type trackModel struct {
	started       bool
	start, cursor int64 // offsets in [start, cursor) have an owner
	owner         map[int64]int
	known         Ranges // from assign
	durable       []bool
	committed     int64
}

const nilUnit = -1

func (m *trackModel) handled(o int64) bool {
	if o < m.start {
		return m.started
	}
	if o >= m.cursor {
		return m.known.Contains(o)
	}
	k := m.owner[o]
	return k == nilUnit || m.durable[k]
}

// route: a record at off, for unit k. Offsets skipped since the last one
// have no record: up to the end of a known run they pass, they are
// handled; the rest go with off.
func (m *trackModel) Route(off int64, k int) bool {
	if !m.started {
		m.started, m.start, m.cursor, m.committed = true, off, off, off
	}
	if off < m.cursor {
		return false
	}
	if m.known.Contains(off) {
		k = nilUnit
	}
	gapTo := m.cursor
	for _, r := range m.known {
		if r[1] <= off && r[1] > gapTo {
			gapTo = r[1]
		}
	}
	for o := m.cursor; o <= off; o++ {
		if o < gapTo {
			m.owner[o] = nilUnit
		} else {
			m.owner[o] = k
		}
	}
	m.cursor = off + 1
	return !m.known.Contains(off)
}

// state is the canonical state: Next is the first offset not handled.
func (m *trackModel) State() State {
	if !m.started {
		return State{}
	}
	end := max(m.cursor, m.known.Max())
	next := m.start
	for next < end && m.handled(next) {
		next++
	}
	st := State{Next: next}
	for o := next + 1; o < end; o++ {
		if m.handled(o) {
			st.Above = st.Above.Add(o, o+1)
		}
	}
	return st
}

func (m *trackModel) Ranges(k int) Ranges {
	var r Ranges
	for o := m.start; o < m.cursor; o++ {
		if m.owner[o] == k {
			r = r.Add(o, o+1)
		}
	}
	return r
}

// The tracker against trackModel: random routing of increasing offsets
// with gaps to a few files and to nil, duplicates, files made durable in
// any order, and commits, from a resumed state or none.
func TestTrackerProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tr := NewTracker()
		m := &trackModel{owner: map[int64]int{}}
		if rapid.Bool().Draw(rt, "resumed") {
			next := rapid.Int64Range(0, 10).Draw(rt, "next")
			var known Ranges
			at := next + 1
			for i, n := 0, rapid.IntRange(0, 4).Draw(rt, "known"); i < n; i++ {
				from := at + rapid.Int64Range(0, 4).Draw(rt, "gap")
				to := from + rapid.Int64Range(1, 4).Draw(rt, "len")
				known = known.Add(from, to)
				at = to + 1
			}
			tr.Assign(tpA, State{Next: next, Above: known})
			m.started, m.start, m.cursor, m.committed, m.known = true, next, next, next, known
		}
		var units []*Unit
		check := func(what string) {
			st := tr.State(tpA)
			want := m.State()
			if err := st.Above.Valid(); err != nil {
				rt.Fatalf("after %s: state %+v: %v", what, st, err)
			}
			for o := int64(0); o < max(m.cursor, m.known.Max())+3; o++ {
				if st.Handled(o) != m.handled(o) {
					rt.Fatalf("after %s: state %+v, want %+v: Handled(%d) = %v", what, st, want, o, st.Handled(o))
				}
				if tr.Has(tpA, o) != (o < m.cursor && m.started || m.known.Contains(o)) {
					rt.Fatalf("after %s: has(%d) = %v", what, o, tr.Has(tpA, o))
				}
			}
			// Above may hold a known run that routing has partly passed;
			// folded, the state is the model's exactly.
			got := State{Next: st.Next}.With(st.Above)
			if got.Next != want.Next || !slices.Equal(got.Above, want.Above) {
				rt.Fatalf("after %s: state %+v (folded %+v), want %+v", what, st, got, want)
			}
			for k, u := range units {
				if r := tr.Ranges(u); !slices.Equal(r, m.Ranges(k)) {
					rt.Fatalf("after %s: unit %d has %v, want %v", what, k, r, m.Ranges(k))
				}
			}
		}
		check("start")
		for step, n := 0, rapid.IntRange(1, 80).Draw(rt, "steps"); step < n; step++ {
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1, 2, 3, 4:
				off := m.cursor + rapid.Int64Range(0, 3).Draw(rt, "gap")
				if !m.started {
					off = rapid.Int64Range(0, 10).Draw(rt, "first")
				}
				k := rapid.IntRange(nilUnit, min(len(units), 3)).Draw(rt, "unit")
				var u *Unit
				switch {
				case k == len(units):
					u = &Unit{}
					units = append(units, u)
					m.durable = append(m.durable, false)
				case k >= 0:
					u = units[k]
					if m.durable[k] {
						// A durable file takes no more records: a new one.
						k, u = len(units), &Unit{}
						units = append(units, u)
						m.durable = append(m.durable, false)
					}
				}
				// The sink asks has first, and routes a known record to
				// nil; route alone must refuse it to a file too.
				if rapid.Bool().Draw(rt, "has first") && tr.Has(tpA, off) {
					u, k = nil, nilUnit
				}
				if got, want := tr.Route(tpA, off, u), m.Route(off, k); got != want {
					rt.Fatalf("route(%d, unit %d) = %v, want %v", off, k, got, want)
				}
				check("route")
			case 5:
				if !m.started {
					continue
				}
				off := rapid.Int64Range(m.start-2, m.cursor).Draw(rt, "duplicate") - 1
				k := rapid.IntRange(nilUnit, len(units)-1).Draw(rt, "unit")
				var u *Unit
				if k >= 0 {
					u = units[k]
				}
				if tr.Route(tpA, off, u) {
					rt.Fatalf("route(%d) = true below the cursor %d", off, m.cursor)
				}
				check("duplicate")
			case 6, 7:
				if len(units) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(units)-1).Draw(rt, "durable")
				tr.MarkDurable(units[k])
				m.durable[k] = true
				check("markDurable")
			case 8, 9:
				got, ok := tr.Committable(nil)[tpA]
				if !ok {
					got = m.committed
				}
				if got < m.committed || ok && got == m.committed {
					rt.Fatalf("committable = %d (%v), after %d", got, ok, m.committed)
				}
				// Never past an offset not handled, and up to the first one
				// routed (a known run not reached yet waits for its records).
				want := min(m.State().Next, m.cursor)
				if (m.started && (want > m.committed) != ok) || (ok && got != want) {
					rt.Fatalf("committable = %d (%v), want %d (state %+v, cursor %d)", got, ok, want, m.State(), m.cursor)
				}
				for o := m.start; o < got; o++ {
					if !m.handled(o) {
						rt.Fatalf("committable = %d passes %d, not durable", got, o)
					}
				}
				m.committed = got
				check("committable")
			}
		}
	})
}
