package verify

import (
	"fmt"
	"io"
	"sort"
)

// Offsets are per-topic, per-partition offsets from Kafka.
type Offsets map[string]map[int32]int64

// PartitionReport compares one partition's storage with Kafka.
type PartitionReport struct {
	Topic      string     `json:"topic"`
	Partition  int32      `json:"partition"`
	Files      int        `json:"files"`
	Records    int64      `json:"records"`
	Ranges     [][2]int64 `json:"stored_ranges"` // [from, to) runs of stored offsets
	Gaps       [][2]int64 `json:"gaps"`          // missing [from, to) below the committed offset
	Duplicates int64      `json:"duplicates"`
	LogStart   int64      `json:"log_start_offset"`
	Committed  int64      `json:"committed_offset"` // -1: no commit
	End        int64      `json:"end_offset"`
	OK         bool       `json:"ok"`
}

// Report is the verdict over every partition seen in storage or Kafka.
type Report struct {
	Partitions []PartitionReport `json:"partitions"`
	OK         bool              `json:"ok"`
}

// Compare checks storage against Kafka. A partition is consistent when no
// offset is stored twice and every offset from the log start (or the first
// stored offset, if retention has not reached it) up to the committed offset
// is stored. Offsets stored past the commit are fine: their commit is due.
// Compacted topics and transaction markers leave offsets that Kafka itself
// no longer has; they show as gaps, so verify such topics with care.
func Compare(stored map[string]map[int32]*Partition, logStart, committed, end Offsets) Report {
	keys := map[[2]any]bool{}
	add := func(t string, p int32) { keys[[2]any{t, p}] = true }
	for t, ps := range stored {
		for p := range ps {
			add(t, p)
		}
	}
	for t, ps := range end {
		for p := range ps {
			add(t, p)
		}
	}
	r := Report{OK: true}
	for k := range keys {
		t, p := k[0].(string), k[1].(int32)
		pr := PartitionReport{Topic: t, Partition: p, Committed: -1, LogStart: logStart[t][p], End: end[t][p]}
		if c, ok := committed[t][p]; ok {
			pr.Committed = c
		}
		sp := stored[t][p]
		if sp != nil {
			pr.Files, pr.Records, pr.Duplicates = sp.Files, sp.Records, sp.Duplicates
			pr.Ranges = sp.ranges()
		}
		if pr.Committed > pr.LogStart {
			// A group that started at "latest" never consumed what came
			// before its first file: check from there.
			from := pr.LogStart
			var none Partition
			if sp == nil {
				sp = &none
			} else if len(sp.offsets) > 0 {
				from = max(from, sp.offsets[0])
			}
			pr.Gaps = sp.Gaps(from, pr.Committed)
		}
		pr.OK = pr.Duplicates == 0 && len(pr.Gaps) == 0
		r.OK = r.OK && pr.OK
		r.Partitions = append(r.Partitions, pr)
	}
	sort.Slice(r.Partitions, func(i, j int) bool {
		a, b := r.Partitions[i], r.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return r
}

// ranges folds the sorted offsets into [from, to) runs.
func (p *Partition) ranges() [][2]int64 {
	var out [][2]int64
	for _, o := range p.offsets {
		if n := len(out); n > 0 && o <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], o+1)
			continue
		}
		out = append(out, [2]int64{o, o + 1})
	}
	return out
}

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) error {
	for _, p := range r.Partitions {
		status := "ok"
		if !p.OK {
			status = "INCONSISTENT"
		}
		if _, err := fmt.Fprintf(w, "%s/%d: %s  files %d  records %d  stored %s  committed %d  end %d  log start %d",
			p.Topic, p.Partition, status, p.Files, p.Records, fmtRanges(p.Ranges), p.Committed, p.End, p.LogStart); err != nil {
			return err
		}
		if p.Duplicates > 0 {
			fmt.Fprintf(w, "  duplicates %d", p.Duplicates)
		}
		if len(p.Gaps) > 0 {
			fmt.Fprintf(w, "  gaps %s", fmtRanges(p.Gaps))
		}
		fmt.Fprintln(w)
	}
	verdict := "storage is consistent with Kafka"
	if !r.OK {
		verdict = "storage is NOT consistent with Kafka"
	}
	_, err := fmt.Fprintf(w, "%d partitions: %s\n", len(r.Partitions), verdict)
	return err
}

func fmtRanges(rs [][2]int64) string {
	if len(rs) == 0 {
		return "[]"
	}
	s := ""
	for i, r := range rs {
		if i == 5 {
			return s + fmt.Sprintf(" (+%d more)", len(rs)-5)
		}
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("[%d,%d)", r[0], r[1])
	}
	return s
}
