package offsets

import (
	"context"
	"slices"
	"sync"
)

// Unit is what becomes durable at once: one file's records, as the runs
// of offsets it accounts for. A new file starts with a zero Unit, which
// Route then gives its offsets.
type Unit struct {
	ranges    Ranges
	durable   bool
	abandoned bool // its file will never be published (partition dropped)
	// gap marks a unit with no file: offsets the log no longer holds
	// (Tracker.Lose), its ranges. It becomes durable with the file that
	// adopted it, whose ledger entry records it in gaps.
	gap     bool
	gaps    []Gap
	adopted []*Unit
	by      *Unit // the unit that adopted this gap unit
}

// piece is a run of offsets [start, end) and the unit that accounts for
// it; nil means handled already (skipped by the error policy, or stored
// before this process resumed).
type piece struct {
	start, end int64
	u          *Unit
}

// partTrack is one partition's offsets, tiled by pieces from base to
// cursor in offset order. Records of one partition may go to several open
// files at once (time or key layouts), so neighbouring pieces may belong
// to different files, and a file's offsets may be several runs.
type partTrack struct {
	base   int64 // every offset below is handled and was popped
	cursor int64 // one past the last offset routed
	pieces []piece
	// known are handled runs above cursor, from the ledger at resume:
	// records there are already stored and are skipped, not written.
	known Ranges
	// orphans are gap units that no file has adopted yet: the next file
	// routed a record of the partition records them in its entry.
	orphans []*Unit
}

// Tracker knows, per partition, which offsets are durable. It is the only
// input to offset commits: a partition's committable offset is the end of
// the longest prefix of durable pieces, so a commit never passes a record
// that is not in storage. It is also what a ledger entry records as the
// state before its file.
type Tracker struct {
	mu    sync.Mutex
	parts map[TopicPartition]*partTrack
	wake  chan struct{}
	err   error // an upload failed: waiting is pointless
}

// NewTracker returns a Tracker that knows no partition yet.
func NewTracker() *Tracker {
	return &Tracker{parts: map[TopicPartition]*partTrack{}, wake: make(chan struct{})}
}

// Assign starts a partition from a resumed state: offsets below st.Next
// and in st.Above are handled. A negative st.Next means nothing is known:
// the partition starts at the first record routed.
func (t *Tracker) Assign(tp TopicPartition, st State) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st.Next < 0 {
		// Unknown: the partition starts at its first record.
		delete(t.parts, tp)
		return
	}
	t.parts[tp] = &partTrack{base: st.Next, cursor: st.Next, known: append(Ranges(nil), st.Above...)}
}

// Route accounts offset off to u (nil: handled without a file). It
// reports false when the record at off is handled already and must not be
// written: stored before a resume, or delivered twice.
func (t *Tracker) Route(tp TopicPartition, off int64, u *Unit) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[tp]
	if p == nil {
		p = &partTrack{base: off, cursor: off}
		t.parts[tp] = p
	}
	if off < p.cursor {
		return false
	}
	if u != nil && len(p.orphans) > 0 {
		for _, g := range p.orphans {
			u.gaps = append(u.gaps, g.gaps...)
			g.by = u
		}
		u.adopted = append(u.adopted, p.orphans...)
		p.orphans = nil
	}
	// Known runs below off were passed by records that don't exist any
	// more (or never did): they stay handled.
	for len(p.known) > 0 && p.known[0][1] <= off {
		p.add(p.known[0][0], p.known[0][1], nil)
		p.known = p.known[1:]
	}
	if len(p.known) > 0 && p.known[0][0] <= off {
		p.add(off, off+1, nil)
		t.signalLocked()
		return false
	}
	p.add(off, off+1, u)
	if u == nil {
		t.signalLocked()
	}
	return true
}

// Lose tiles the offsets from the partition's cursor up to to, less those
// stored before the resume, as a gap of cause: offsets the log no longer
// holds. They are not committable until the partition's next file, which
// records them in its ledger entry, is published. It returns them, none
// when the cursor is at or past to or the partition's start is unknown.
func (t *Tracker) Lose(tp TopicPartition, to int64, cause string) Ranges {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[tp]
	if p == nil || to <= p.cursor {
		return nil
	}
	g := &Unit{gap: true}
	for len(p.known) > 0 && p.known[0][0] < to {
		k := p.known[0]
		p.add(0, k[0], g)
		p.add(0, min(k[1], to), nil)
		if k[1] > to {
			p.known[0] = [2]int64{to, k[1]}
			break
		}
		p.known = p.known[1:]
	}
	p.add(0, to, g)
	if len(g.ranges) == 0 {
		return nil
	}
	g.gaps = []Gap{{Ranges: append(Ranges(nil), g.ranges...), Cause: cause}}
	p.orphans = append(p.orphans, g)
	t.signalLocked()
	return g.ranges
}

// Gaps returns a copy of the gaps u adopted.
func (t *Tracker) Gaps(u *Unit) []Gap {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(u.gaps)
}

// Unroute makes the offset off, routed to u, handled without a file: its
// record could not be encoded, and the error policy dealt with it. u is
// not durable yet (its file is still encoding), so its pieces are all
// still here.
func (t *Tracker) Unroute(tp TopicPartition, off int64, u *Unit) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u.ranges = u.ranges.Subtract(Ranges{{off, off + 1}})
	p := t.parts[tp]
	if p == nil {
		return // dropped meanwhile
	}
	for i, pc := range p.pieces {
		if pc.u != u || off < pc.start || off >= pc.end {
			continue
		}
		split := make([]piece, 0, 3)
		if pc.start < off {
			split = append(split, piece{pc.start, off, u})
		}
		split = append(split, piece{off, off + 1, nil})
		if off+1 < pc.end {
			split = append(split, piece{off + 1, pc.end, u})
		}
		p.pieces = slices.Replace(p.pieces, i, i+1, split...)
		break
	}
	t.signalLocked()
}

// Has reports whether the record at off is handled already: stored before
// a resume, or delivered twice.
func (t *Tracker) Has(tp TopicPartition, off int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[tp]
	return p != nil && (off < p.cursor || p.known.Contains(off))
}

// add tiles [p.cursor, end) with u: the offsets between the last routed
// one and start have no record, and go with the record that follows.
func (p *partTrack) add(_, end int64, u *Unit) {
	start := p.cursor
	if end <= start {
		return
	}
	p.cursor = end
	if u != nil {
		u.ranges = u.ranges.Add(start, end)
	}
	if n := len(p.pieces); n > 0 && p.pieces[n-1].u == u && p.pieces[n-1].end == start {
		p.pieces[n-1].end = end
		return
	}
	p.pieces = append(p.pieces, piece{start, end, u})
}

// MarkDurable records that u's file is published, and with it the gaps it
// adopted, and wakes waiters.
func (t *Tracker) MarkDurable(u *Unit) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u.durable = true
	for _, g := range u.adopted {
		g.durable = true
	}
	t.signalLocked()
}

func (t *Tracker) signalLocked() {
	close(t.wake)
	t.wake = make(chan struct{})
}

// Wake returns a channel that is closed the next time something becomes
// durable.
func (t *Tracker) Wake() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wake
}

func handled(u *Unit) bool { return u == nil || u.durable }

// Committable pops the durable prefix of each partition (all partitions when
// only is nil) and returns the offset to commit for those that advanced.
func (t *Tracker) Committable(only map[TopicPartition]bool) map[TopicPartition]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[TopicPartition]int64{}
	for tp, p := range t.parts {
		if only != nil && !only[tp] {
			continue
		}
		i := 0
		for i < len(p.pieces) && handled(p.pieces[i].u) {
			p.base = p.pieces[i].end
			i++
		}
		if i > 0 {
			out[tp] = p.base
			p.pieces = append(p.pieces[:0:0], p.pieces[i:]...)
		}
	}
	return out
}

// State is what is handled in a partition now: the ledger's "before" for
// the next file to be published.
func (t *Tracker) State(tp TopicPartition) State {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[tp]
	if p == nil {
		return State{}
	}
	st := State{Next: p.base}
	i := 0
	for i < len(p.pieces) && handled(p.pieces[i].u) {
		st.Next = p.pieces[i].end
		i++
	}
	for _, pc := range p.pieces[i:] {
		if handled(pc.u) {
			st.Above = st.Above.Add(pc.start, pc.end)
		}
	}
	return State{Next: st.Next}.With(st.Above.Union(p.known))
}

// Ranges returns a copy of u's runs.
func (t *Tracker) Ranges(u *Unit) Ranges {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(Ranges(nil), u.ranges...)
}

// Fail records that an upload failed and wakes waiters.
func (t *Tracker) Fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
	t.signalLocked()
}

// PendingUnits returns the units of the partitions that are not durable now.
func (t *Tracker) PendingUnits(tps map[TopicPartition]bool) []*Unit {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[*Unit]bool{}
	var out []*Unit
	for tp := range tps {
		p := t.parts[tp]
		if p == nil {
			continue
		}
		for _, pc := range p.pieces {
			// A gap waits on the file that adopted it, which may hold
			// no piece of its own any more (its records all skipped by
			// the error policy, its entry still to write); an orphan gap
			// waits on a file not routed yet: nothing to wait for.
			u := pc.u
			if u != nil && u.gap {
				u = u.by
			}
			if u != nil && !handled(u) && !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// pending reports whether any of the units is not durable yet, or the
// error that means it never will be.
func (t *Tracker) pending(us []*Unit) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return false, t.err
	}
	for _, u := range us {
		if !u.durable && !u.abandoned {
			return true, nil
		}
	}
	return false, nil
}

// WaitDurable blocks until every one of the units is durable or abandoned.
func (t *Tracker) WaitDurable(ctx context.Context, us []*Unit) error {
	for {
		w := t.Wake()
		pending, err := t.pending(us)
		if err != nil {
			return err
		}
		if !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w:
		}
	}
}

// Drop forgets the partitions: their units not durable yet are abandoned,
// so that nothing waits on a file that will never be published.
func (t *Tracker) Drop(tps map[TopicPartition]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tp := range tps {
		if p := t.parts[tp]; p != nil {
			for _, pc := range p.pieces {
				if pc.u != nil && !pc.u.durable {
					pc.u.abandoned = true
				}
			}
		}
		delete(t.parts, tp)
	}
	t.signalLocked()
}
