package offsets

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Ranges is a set of offsets as sorted, disjoint, non-adjacent half-open
// runs [from, to). The zero value is the empty set.
type Ranges [][2]int64

// Add returns r with [from, to) added.
func (r Ranges) Add(from, to int64) Ranges {
	if from >= to {
		return r
	}
	// Fast path: appending at the end, as a consumer reading in offset
	// order does.
	if n := len(r); n == 0 || r[n-1][1] < from {
		return append(r, [2]int64{from, to})
	} else if r[n-1][0] <= from {
		r[n-1][1] = max(r[n-1][1], to)
		return r
	}
	// General case: merge every run that touches [from, to).
	i := sort.Search(len(r), func(i int) bool { return r[i][1] >= from })
	j := i
	for j < len(r) && r[j][0] <= to {
		from, to = min(from, r[j][0]), max(to, r[j][1])
		j++
	}
	out := make(Ranges, 0, len(r)-(j-i)+1)
	out = append(out, r[:i]...)
	out = append(out, [2]int64{from, to})
	return append(out, r[j:]...)
}

// Union returns r with every run of o added.
func (r Ranges) Union(o Ranges) Ranges {
	for _, x := range o {
		r = r.Add(x[0], x[1])
	}
	return r
}

// Contains reports whether offset o is in the set.
func (r Ranges) Contains(o int64) bool {
	i := sort.Search(len(r), func(i int) bool { return r[i][1] > o })
	return i < len(r) && r[i][0] <= o
}

// Overlap returns the offsets that are in both r and o.
func (r Ranges) Overlap(o Ranges) Ranges {
	var out Ranges
	i, j := 0, 0
	for i < len(r) && j < len(o) {
		from, to := max(r[i][0], o[j][0]), min(r[i][1], o[j][1])
		if from < to {
			out = out.Add(from, to)
		}
		if r[i][1] < o[j][1] {
			i++
		} else {
			j++
		}
	}
	return out
}

// From returns the part of r at or above offset at.
func (r Ranges) From(at int64) Ranges {
	i := sort.Search(len(r), func(i int) bool { return r[i][1] > at })
	if i == len(r) {
		return nil
	}
	out := append(Ranges(nil), r[i:]...)
	out[0][0] = max(out[0][0], at)
	return out
}

// Count is the number of offsets in the set.
func (r Ranges) Count() int64 {
	var n int64
	for _, x := range r {
		n += x[1] - x[0]
	}
	return n
}

// Max is one past the highest offset in the set, or -1 when it is empty.
func (r Ranges) Max() int64 {
	if len(r) == 0 {
		return -1
	}
	return r[len(r)-1][1]
}

// Valid reports whether r is sorted, disjoint and non-adjacent, with no
// empty or negative run: what a decoded ledger entry must hold before it is
// trusted.
func (r Ranges) Valid() error {
	for i, x := range r {
		if x[0] < 0 || x[0] >= x[1] {
			return fmt.Errorf("run %d [%d, %d) is empty or negative", i, x[0], x[1])
		}
		if i > 0 && r[i-1][1] >= x[0] {
			return fmt.Errorf("runs %d and %d overlap or touch: [%d, %d) then [%d, %d)", i-1, i, r[i-1][0], r[i-1][1], x[0], x[1])
		}
	}
	return nil
}

// MarshalJSON writes an empty set as [] rather than null.
func (r Ranges) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([][2]int64(r))
}

// Subtract returns the offsets of r that are not in o.
func (r Ranges) Subtract(o Ranges) Ranges {
	var out Ranges
	j := 0
	for _, x := range r {
		from, to := x[0], x[1]
		for j < len(o) && o[j][1] <= from {
			j++
		}
		for k := j; k < len(o) && o[k][0] < to; k++ {
			if o[k][0] > from {
				out = out.Add(from, o[k][0])
			}
			from = max(from, o[k][1])
		}
		out = out.Add(from, to)
	}
	return out
}

// FormatRanges prints runs as [a,b),[c,d), at most five of them.
func FormatRanges(rs Ranges) string {
	if len(rs) == 0 {
		return "[]"
	}
	var b strings.Builder
	for i, r := range rs {
		if i == 5 {
			fmt.Fprintf(&b, " (+%d more)", len(rs)-5)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%d,%d)", r[0], r[1])
	}
	return b.String()
}
