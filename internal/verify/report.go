package verify

import (
	"fmt"
	"io"

	"github.com/spillway/spillway/internal/audit"
	"github.com/spillway/spillway/internal/offsets"
)

// PartitionReport compares one partition's storage with Kafka. Ranges are
// [from, to) runs of offsets.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	TopicID   string `json:"topic_id"`
	OK        bool   `json:"ok"`
	LogStart  int64  `json:"log_start_offset"`
	End       int64  `json:"end_offset"`
	Committed int64  `json:"committed_offset"` // -1: no commit
	// LedgerEntries and LedgerStart say where the ledger begins; offsets
	// below LedgerStart are not checked. -1: no ledger.
	LedgerEntries int64 `json:"ledger_entries"`
	LedgerStart   int64 `json:"ledger_start_offset"`
	// Handled and HandledAbove are what the ledger says is handled:
	// everything below Handled, and the runs above it. -1: no ledger.
	Handled      int64          `json:"handled_offset"`
	HandledAbove offsets.Ranges `json:"handled_above"`
	// Files, Records and Bytes count published files, from their entries.
	Files   int64 `json:"files"`
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Ranges are the offsets in published files; Skipped those handled
	// without a file (the error policy, or a group moved forward).
	Ranges  offsets.Ranges `json:"stored_ranges"`
	Skipped offsets.Ranges `json:"skipped_ranges"`
	// Lost are offsets the ledger records as deleted from the log before
	// they were stored (a problem); OperatorSkipped those an operator
	// skipped on purpose with spillway skip (reported, not a problem).
	Lost            offsets.Ranges `json:"lost_ranges,omitempty"`
	OperatorSkipped offsets.Ranges `json:"operator_skipped_ranges,omitempty"`
	// Gaps are offsets below the commit in none of the above.
	Gaps            offsets.Ranges `json:"gaps"`
	Duplicates      int64          `json:"duplicates"`
	DuplicateRanges offsets.Ranges `json:"duplicate_ranges"`
	// NotInTable is what the ledger holds past the partition's Iceberg
	// table, when iceberg.table is set: not a problem.
	NotInTable *NotInTable `json:"not_in_table,omitempty"`
	// Deep is what a deep check read (--deep).
	Deep     *audit.DeepStats `json:"deep,omitempty"`
	Problems []audit.Problem  `json:"problems"`
	// Notes say what was found and explained, not a problem (a paused
	// writer's file published late under a name entered again).
	Notes []string `json:"notes,omitempty"`
}

// Report is the verdict over every partition of the topics checked.
type Report struct {
	OK      bool   `json:"ok"`
	Cluster string `json:"cluster_id"`
	Prefix  string `json:"prefix"`
	Deep    bool   `json:"deep"`
	// Partitions are sorted by topic and partition.
	Partitions []PartitionReport `json:"partitions"`
	// EarlierFiles counts files another writer left before the cut-over
	// (Options.Foreign).
	EarlierFiles int64 `json:"earlier_files,omitempty"`
	// Tables are the Iceberg table checks, one per topic, when
	// iceberg.table is set.
	Tables []TableReport `json:"tables,omitempty"`
	// Problems are the prefix's own: unknown files, ledgers of other
	// topic ids, table files of no known partition.
	Problems []audit.Problem `json:"problems"`
}

// ProblemCount counts every problem of the report.
func (r Report) ProblemCount() int {
	n := len(r.Problems)
	for _, p := range r.Partitions {
		n += len(p.Problems)
	}
	return n
}

// maxListed bounds the problems of one kind printed per partition; the
// JSON report has them all.
const maxListed = 10

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	for _, p := range r.Partitions {
		status := "ok"
		if !p.OK {
			status = "INCONSISTENT"
		}
		ew.printf("%s/%d: %s  files %d  records %d  stored %s  committed %d  end %d  log start %d",
			p.Topic, p.Partition, status, p.Files, p.Records, offsets.FormatRanges(p.Ranges), p.Committed, p.End, p.LogStart)
		if p.LedgerStart >= 0 {
			ew.printf("  ledger from %d, entries %d", p.LedgerStart, p.LedgerEntries)
		} else {
			ew.printf("  no ledger")
		}
		if len(p.Skipped) > 0 {
			ew.printf("  skipped %s", offsets.FormatRanges(p.Skipped))
		}
		if len(p.OperatorSkipped) > 0 {
			ew.printf("  skipped by operator %s", offsets.FormatRanges(p.OperatorSkipped))
		}
		if len(p.Lost) > 0 {
			ew.printf("  LOST %s", offsets.FormatRanges(p.Lost))
		}
		if p.Duplicates > 0 {
			ew.printf("  duplicates %d", p.Duplicates)
		}
		if len(p.Gaps) > 0 {
			ew.printf("  gaps %s", offsets.FormatRanges(p.Gaps))
		}
		ew.printf("\n")
		if d := p.Deep; d != nil {
			ew.printf("  read back: files %d, records %d\n", d.Files, d.Records)
			for _, n := range d.NotChecked {
				ew.printf("  not checked: %s (such as %s): %s\n", plural(int(n.Files), "file"), n.Example, n.Why)
			}
		}
		for _, n := range p.Notes {
			ew.printf("  note: %s\n", n)
		}
		writeProblems(ew, p.Problems)
	}
	if r.EarlierFiles > 0 {
		ew.printf("prefix %q: %s written before the cut-over (storage.earlier_files: foreign), not checked\n", r.Prefix, plural(int(r.EarlierFiles), "file"))
	}
	for _, tr := range r.Tables {
		if !tr.Exists {
			ew.printf("table %s (topic %s): does not exist yet\n", tr.Table, tr.Topic)
		} else {
			ew.printf("table %s (topic %s): %s in the current snapshot\n", tr.Table, tr.Topic, plural(tr.Files, "data file"))
		}
		if len(tr.Orphans) > 0 {
			ew.printf("  orphans: %s, %d bytes, under %s that no ledger entry names (a writer stopped between upload and ledger entry; no snapshot holds them, they may be deleted)\n",
				plural(len(tr.Orphans), "file"), tr.OrphanBytes, tr.DataPrefix)
			for i, o := range tr.Orphans {
				if i == maxListed {
					ew.printf("  orphan: %d more (see --json)\n", len(tr.Orphans)-maxListed)
					break
				}
				ew.printf("  orphan: %s (%d bytes)\n", o.Key, o.Bytes)
			}
		}
	}
	if len(r.Problems) > 0 {
		ew.printf("prefix %q:\n", r.Prefix)
		writeProblems(ew, r.Problems)
	}
	if r.OK {
		ew.printf("%s: storage is consistent with Kafka\n", plural(len(r.Partitions), "partition"))
	} else {
		ew.printf("%s, %s: storage is NOT consistent with Kafka\n", plural(len(r.Partitions), "partition"), plural(r.ProblemCount(), "problem"))
	}
	return ew.err
}

func writeProblems(ew *errWriter, ps []audit.Problem) {
	shown := map[string]int{}
	for _, p := range ps {
		shown[p.Kind]++
		switch n := shown[p.Kind]; {
		case n <= maxListed:
			ew.printf("  %s: %s\n", p.Kind, p.Message)
		case n == maxListed+1:
			more := 0
			for _, q := range ps {
				if q.Kind == p.Kind {
					more++
				}
			}
			ew.printf("  %s: %d more (see --json)\n", p.Kind, more-maxListed)
		}
	}
}

// errWriter keeps the first write error, so printing reads straight.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
