package offsets_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/spillway/spillway/internal/offsets"
)

func wantRanges(t *testing.T, what string, got, want offsets.Ranges) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func TestRangesAdd(t *testing.T) {
	for _, c := range []struct {
		name string
		adds [][2]int64
		want offsets.Ranges
	}{
		{"empty", nil, nil},
		{"empty run is nothing", [][2]int64{{5, 5}, {6, 5}}, nil},
		{"in order", [][2]int64{{0, 3}, {5, 7}, {9, 10}}, offsets.Ranges{{0, 3}, {5, 7}, {9, 10}}},
		{"adjacent at the end merges", [][2]int64{{0, 3}, {3, 5}, {5, 6}}, offsets.Ranges{{0, 6}}},
		{"overlapping the end extends it", [][2]int64{{0, 5}, {3, 8}}, offsets.Ranges{{0, 8}}},
		{"inside the last run changes nothing", [][2]int64{{0, 10}, {2, 5}}, offsets.Ranges{{0, 10}}},
		{"before everything", [][2]int64{{10, 12}, {0, 2}}, offsets.Ranges{{0, 2}, {10, 12}}},
		{"in a gap", [][2]int64{{0, 2}, {10, 12}, {5, 6}}, offsets.Ranges{{0, 2}, {5, 6}, {10, 12}}},
		{"adjacent to the first from below", [][2]int64{{5, 8}, {10, 12}, {2, 5}}, offsets.Ranges{{2, 8}, {10, 12}}},
		{"fills a gap exactly", [][2]int64{{0, 2}, {4, 6}, {2, 4}}, offsets.Ranges{{0, 6}}},
		{"spans several runs", [][2]int64{{0, 2}, {4, 6}, {8, 10}, {12, 14}, {1, 9}}, offsets.Ranges{{0, 10}, {12, 14}}},
		{"covers everything", [][2]int64{{3, 4}, {6, 7}, {9, 10}, {0, 20}}, offsets.Ranges{{0, 20}}},
		{"inside an earlier run", [][2]int64{{0, 10}, {20, 30}, {3, 4}}, offsets.Ranges{{0, 10}, {20, 30}}},
		{"touches the next run only", [][2]int64{{0, 2}, {6, 8}, {20, 30}, {4, 6}}, offsets.Ranges{{0, 2}, {4, 8}, {20, 30}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r offsets.Ranges
			for _, a := range c.adds {
				r = r.Add(a[0], a[1])
			}
			wantRanges(t, "Add", r, c.want)
			if err := r.Valid(); err != nil {
				t.Fatalf("Add made an invalid set %v: %v", r, err)
			}
		})
	}
}

func TestRangesUnion(t *testing.T) {
	a := offsets.Ranges{{0, 2}, {10, 12}}
	b := offsets.Ranges{{2, 4}, {6, 8}, {11, 20}}
	wantRanges(t, "a ∪ b", append(offsets.Ranges(nil), a...).Union(b), offsets.Ranges{{0, 4}, {6, 8}, {10, 20}})
	wantRanges(t, "b ∪ a", append(offsets.Ranges(nil), b...).Union(a), offsets.Ranges{{0, 4}, {6, 8}, {10, 20}})
	wantRanges(t, "a ∪ nil", append(offsets.Ranges(nil), a...).Union(nil), a)
	wantRanges(t, "nil ∪ a", offsets.Ranges(nil).Union(a), a)
	wantRanges(t, "b (unchanged)", b, offsets.Ranges{{2, 4}, {6, 8}, {11, 20}})
}

func TestRangesContains(t *testing.T) {
	r := offsets.Ranges{{2, 4}, {10, 11}}
	for o, want := range map[int64]bool{-1: false, 0: false, 1: false, 2: true, 3: true, 4: false, 9: false, 10: true, 11: false, 100: false} {
		if got := r.Contains(o); got != want {
			t.Errorf("%v.Contains(%d) = %v, want %v", r, o, got, want)
		}
	}
	if offsets.Ranges(nil).Contains(0) {
		t.Error("the empty set contains 0")
	}
}

func TestRangesOverlap(t *testing.T) {
	r := offsets.Ranges{{0, 5}, {10, 15}, {20, 25}}
	for _, c := range []struct {
		o, want offsets.Ranges
	}{
		{nil, nil},
		{offsets.Ranges{{5, 10}}, nil},
		{offsets.Ranges{{4, 11}}, offsets.Ranges{{4, 5}, {10, 11}}},
		{offsets.Ranges{{0, 100}}, r},
		{offsets.Ranges{{1, 2}, {3, 4}, {12, 22}}, offsets.Ranges{{1, 2}, {3, 4}, {12, 15}, {20, 22}}},
		{offsets.Ranges{{14, 15}, {24, 30}}, offsets.Ranges{{14, 15}, {24, 25}}},
		{offsets.Ranges{{30, 40}}, nil},
	} {
		wantRanges(t, "r ∩ o", r.Overlap(c.o), c.want)
		wantRanges(t, "o ∩ r", c.o.Overlap(r), c.want)
	}
	if got := offsets.Ranges(nil).Overlap(r); got != nil {
		t.Fatalf("nil ∩ r = %v, want nil", got)
	}
}

func TestRangesFrom(t *testing.T) {
	r := offsets.Ranges{{2, 4}, {10, 15}}
	wantRanges(t, "From(0)", r.From(0), r)
	wantRanges(t, "From(2)", r.From(2), r)
	wantRanges(t, "From(3)", r.From(3), offsets.Ranges{{3, 4}, {10, 15}})
	wantRanges(t, "From(4)", r.From(4), offsets.Ranges{{10, 15}})
	wantRanges(t, "From(12)", r.From(12), offsets.Ranges{{12, 15}})
	wantRanges(t, "From(14)", r.From(14), offsets.Ranges{{14, 15}})
	if got := r.From(15); got != nil {
		t.Fatalf("From(15) = %v, want nil", got)
	}
	if got := offsets.Ranges(nil).From(0); got != nil {
		t.Fatalf("nil.From(0) = %v, want nil", got)
	}
	// A copy: the receiver is never clipped.
	_ = r.From(3).Add(0, 100)
	wantRanges(t, "r after From", r, offsets.Ranges{{2, 4}, {10, 15}})
}

func TestRangesCountMax(t *testing.T) {
	if n, m := offsets.Ranges(nil).Count(), offsets.Ranges(nil).Max(); n != 0 || m != -1 {
		t.Fatalf("empty: Count %d Max %d, want 0 and -1", n, m)
	}
	r := offsets.Ranges{{0, 1}, {5, 10}, {20, 22}}
	if n, m := r.Count(), r.Max(); n != 8 || m != 22 {
		t.Fatalf("%v: Count %d Max %d, want 8 and 22", r, n, m)
	}
}

func TestRangesValid(t *testing.T) {
	for _, r := range []offsets.Ranges{nil, {}, {{0, 1}}, {{0, 1}, {2, 3}}, {{5, 1 << 62}}} {
		if err := r.Valid(); err != nil {
			t.Errorf("%v.Valid() = %v, want nil", r, err)
		}
	}
	for _, r := range []offsets.Ranges{
		{{1, 1}},           // empty
		{{2, 1}},           // backwards
		{{-1, 3}},          // negative
		{{0, 2}, {2, 3}},   // adjacent
		{{0, 5}, {3, 8}},   // overlapping
		{{10, 12}, {0, 2}}, // out of order
		{{0, 2}, {4, 4}},   // an empty run after a good one
	} {
		if err := r.Valid(); err == nil {
			t.Errorf("%v.Valid() = nil, want an error", r)
		}
	}
}

func TestRangesMarshalJSON(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{offsets.Ranges(nil), `[]`},
		{offsets.Ranges{}, `[]`},
		{offsets.Ranges{{1, 2}, {5, 9}}, `[[1,2],[5,9]]`},
		// Inside a struct too: a ledger entry never says null.
		{offsets.State{Next: 3}, `{"next":3,"above":[]}`},
		{offsets.State{Next: 3, Above: offsets.Ranges{{5, 6}}}, `{"next":3,"above":[[5,6]]}`},
	} {
		got, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("Marshal(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
	var back offsets.Ranges
	if err := json.Unmarshal([]byte(`[[1,2],[5,9]]`), &back); err != nil {
		t.Fatal(err)
	}
	wantRanges(t, "round trip", back, offsets.Ranges{{1, 2}, {5, 9}})
}

// setOf is the model: the offsets in a set.
type setOf map[int64]bool

func (m setOf) ranges() offsets.Ranges {
	os := make([]int64, 0, len(m))
	for o, in := range m {
		if in {
			os = append(os, o)
		}
	}
	sort.Slice(os, func(i, j int) bool { return os[i] < os[j] })
	var r offsets.Ranges
	for _, o := range os {
		if n := len(r); n > 0 && r[n-1][1] == o {
			r[n-1][1]++
		} else {
			r = append(r, [2]int64{o, o + 1})
		}
	}
	return r
}

// drawSet adds random runs, in random order, to both a Ranges and its model.
func drawSet(rt *rapid.T, name string) (offsets.Ranges, setOf) {
	var r offsets.Ranges
	m := setOf{}
	n := rapid.IntRange(0, 12).Draw(rt, name+".runs")
	for i := 0; i < n; i++ {
		from := rapid.Int64Range(0, 60).Draw(rt, name+".from")
		to := from + rapid.Int64Range(-1, 8).Draw(rt, name+".len")
		r = r.Add(from, to)
		for o := from; o < to; o++ {
			m[o] = true
		}
		if err := r.Valid(); err != nil {
			rt.Fatalf("after Add(%d, %d): %v: %v", from, to, r, err)
		}
	}
	return r, m
}

func checkSet(rt *rapid.T, what string, r offsets.Ranges, m setOf) {
	if err := r.Valid(); err != nil {
		rt.Fatalf("%s = %v: %v", what, r, err)
	}
	if want := m.ranges(); !slices.Equal(r, want) {
		rt.Fatalf("%s = %v, want %v", what, r, want)
	}
	for o := int64(-2); o < 72; o++ {
		if r.Contains(o) != m[o] {
			rt.Fatalf("%s = %v: Contains(%d) = %v", what, r, o, r.Contains(o))
		}
	}
	var count int64
	maxO := int64(-1)
	for o, in := range m {
		if in {
			count++
			maxO = max(maxO, o+1)
		}
	}
	if r.Count() != count || r.Max() != maxO {
		rt.Fatalf("%s = %v: Count %d Max %d, want %d and %d", what, r, r.Count(), r.Max(), count, maxO)
	}
}

func TestRangesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a, ma := drawSet(rt, "a")
		b, mb := drawSet(rt, "b")
		checkSet(rt, "a", a, ma)
		checkSet(rt, "b", b, mb)
		aCopy, bCopy := slices.Clone(a), slices.Clone(b)

		union, inter := setOf{}, setOf{}
		for o := range ma {
			union[o] = true
			inter[o] = mb[o]
		}
		for o := range mb {
			union[o] = true
		}
		checkSet(rt, "a ∪ b", slices.Clone(a).Union(b), union)
		checkSet(rt, "a ∩ b", a.Overlap(b), inter)
		checkSet(rt, "b ∩ a", b.Overlap(a), inter)

		at := rapid.Int64Range(-1, 72).Draw(rt, "at")
		from := setOf{}
		for o := range ma {
			from[o] = o >= at
		}
		checkSet(rt, "a.From(at)", a.From(at), from)

		// None of these change their operands.
		if !slices.Equal(a, aCopy) || !slices.Equal(b, bCopy) {
			rt.Fatalf("operands changed: a %v (was %v), b %v (was %v)", a, aCopy, b, bCopy)
		}
	})
}

func TestStateWith(t *testing.T) {
	for _, c := range []struct {
		name string
		s    offsets.State
		rs   offsets.Ranges
		want offsets.State
	}{
		{"nothing", offsets.State{Next: 5}, nil, offsets.State{Next: 5}},
		{"contiguous", offsets.State{Next: 5}, offsets.Ranges{{5, 9}}, offsets.State{Next: 9}},
		{"below Next", offsets.State{Next: 5}, offsets.Ranges{{0, 3}}, offsets.State{Next: 5}},
		{"straddling Next", offsets.State{Next: 5}, offsets.Ranges{{3, 8}}, offsets.State{Next: 8}},
		{"above with a gap", offsets.State{Next: 5}, offsets.Ranges{{7, 9}}, offsets.State{Next: 5, Above: offsets.Ranges{{7, 9}}}},
		{"fills the gap: Above folds in", offsets.State{Next: 5, Above: offsets.Ranges{{7, 9}, {12, 13}}}, offsets.Ranges{{5, 7}}, offsets.State{Next: 9, Above: offsets.Ranges{{12, 13}}}},
		{"fills every gap", offsets.State{Next: 5, Above: offsets.Ranges{{7, 9}, {12, 13}}}, offsets.Ranges{{5, 7}, {9, 12}}, offsets.State{Next: 13}},
		{"between runs of Above", offsets.State{Next: 0, Above: offsets.Ranges{{7, 9}, {12, 13}}}, offsets.Ranges{{10, 11}}, offsets.State{Next: 0, Above: offsets.Ranges{{7, 9}, {10, 11}, {12, 13}}}},
		{"several runs, one folds", offsets.State{Next: 2}, offsets.Ranges{{2, 3}, {4, 5}}, offsets.State{Next: 3, Above: offsets.Ranges{{4, 5}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			above := slices.Clone(c.s.Above)
			got := c.s.With(c.rs)
			if got.Next != c.want.Next || !slices.Equal(got.Above, c.want.Above) {
				t.Fatalf("%+v.With(%v) = %+v, want %+v", c.s, c.rs, got, c.want)
			}
			if !slices.Equal(c.s.Above, above) {
				t.Fatalf("With changed its receiver's Above: %v, was %v", c.s.Above, above)
			}
		})
	}
}

func TestStateHandledEnd(t *testing.T) {
	s := offsets.State{Next: 5, Above: offsets.Ranges{{7, 9}, {12, 13}}}
	for o, want := range map[int64]bool{0: true, 4: true, 5: false, 6: false, 7: true, 8: true, 9: false, 12: true, 13: false} {
		if got := s.Handled(o); got != want {
			t.Errorf("Handled(%d) = %v, want %v", o, got, want)
		}
	}
	if got := s.End(); got != 13 {
		t.Errorf("End() = %d, want 13", got)
	}
	if got := (offsets.State{Next: 5}).End(); got != 5 {
		t.Errorf("End() without Above = %d, want 5", got)
	}
	if got := (offsets.State{}).End(); got != 0 {
		t.Errorf("End() of the zero state = %d, want 0", got)
	}
}

// With keeps the state canonical (Above strictly above Next, never
// touching it) and handles exactly the union.
func TestStateWithProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		above, ma := drawSet(rt, "above")
		next := rapid.Int64Range(0, 70).Draw(rt, "next")
		s := offsets.State{Next: next, Above: above.From(next + 1)}
		rs, mr := drawSet(rt, "rs")
		got := s.With(rs)
		if err := got.Above.Valid(); err != nil {
			rt.Fatalf("%+v.With(%v) = %+v: %v", s, rs, got, err)
		}
		if len(got.Above) > 0 && got.Above[0][0] <= got.Next {
			rt.Fatalf("%+v.With(%v) = %+v: Above touches Next", s, rs, got)
		}
		for o := int64(0); o < 72; o++ {
			want := o < next || (o > next && ma[o]) || mr[o]
			if got.Handled(o) != want {
				rt.Fatalf("%+v.With(%v) = %+v: Handled(%d) = %v", s, rs, got, o, !want)
			}
		}
	})
}

func TestRangesSubtract(t *testing.T) {
	for _, tc := range []struct{ r, o, want offsets.Ranges }{
		{offsets.Ranges{{0, 10}}, nil, offsets.Ranges{{0, 10}}},
		{offsets.Ranges{{0, 10}}, offsets.Ranges{{0, 10}}, nil},
		{offsets.Ranges{{0, 10}}, offsets.Ranges{{2, 4}, {6, 7}}, offsets.Ranges{{0, 2}, {4, 6}, {7, 10}}},
		{offsets.Ranges{{0, 5}, {8, 12}}, offsets.Ranges{{3, 9}}, offsets.Ranges{{0, 3}, {9, 12}}},
		{offsets.Ranges{{5, 6}}, offsets.Ranges{{0, 1}, {10, 20}}, offsets.Ranges{{5, 6}}},
		{offsets.Ranges{{0, 4}, {6, 8}}, offsets.Ranges{{-5, 100}}, nil},
		{nil, offsets.Ranges{{1, 2}}, nil},
	} {
		if got := tc.r.Subtract(tc.o); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v.Subtract(%v) = %v, want %v", tc.r, tc.o, got, tc.want)
		}
	}
	if got := (offsets.State{Next: 0, Above: offsets.Ranges{{3, 5}}}).Ranges(); !reflect.DeepEqual(got, offsets.Ranges{{3, 5}}) {
		t.Errorf("State.Ranges with Next 0 = %v", got)
	}
	if got := (offsets.State{Next: 3, Above: offsets.Ranges{{3, 5}, {7, 8}}}).Ranges(); !reflect.DeepEqual(got, offsets.Ranges{{0, 5}, {7, 8}}) {
		t.Errorf("State.Ranges = %v", got)
	}
}
