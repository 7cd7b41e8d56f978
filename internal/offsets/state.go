package offsets

// State is what is handled in a partition: every offset below Next, and
// the runs in Above. Handled offsets are stored in a published file or were
// skipped by the error policy; either way they are never written again.
type State struct {
	Next  int64  `json:"next"`
	Above Ranges `json:"above"`
}

// With returns the state with rs handled as well, Above folded into Next
// where it has become contiguous.
func (s State) With(rs Ranges) State {
	above := append(Ranges(nil), s.Above...).Union(rs)
	next := s.Next
	for len(above) > 0 && above[0][0] <= next {
		next = max(next, above[0][1])
		above = above[1:]
	}
	return State{Next: next, Above: above}
}

// Handled reports whether offset o is handled.
func (s State) Handled(o int64) bool { return o < s.Next || s.Above.Contains(o) }

// End is one past the highest handled offset.
func (s State) End() int64 { return max(s.Next, s.Above.Max()) }

// Ranges is every offset the state says is handled.
func (s State) Ranges() Ranges {
	return Ranges(nil).Add(0, s.Next).Union(s.Above)
}

// Gap is a run of offsets that storage will never hold, and why. Verify
// names every one; GapRetention is a loss and fails it.
type Gap struct {
	Ranges Ranges `json:"ranges"`
	Cause  string `json:"cause"`
	// Note is what the operator said (GapOperator), for people reading
	// the ledger.
	Note string `json:"note,omitempty"`
}

// Causes of a Gap.
const (
	// GapRetention: the log no longer held the records when Spillway
	// came to them (retention, DeleteRecords, an unclean leader election
	// that truncated the log): they were deleted before they were stored.
	GapRetention = "retention"
	// GapOperator: an operator skipped them on purpose (spillway skip).
	GapOperator = "operator"
)
