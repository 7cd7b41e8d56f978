package verify

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/audit"
	"github.com/spillway/spillway/internal/offsets"
)

// Table is what verify reads of a topic's Iceberg table (iceberg.Current),
// its locations made keys under the storage.
type Table struct {
	Name   string
	Exists bool
	// DataPrefix is the key of the table's data folder ("…/data/"):
	// objects under it that no ledger entry names are orphans.
	DataPrefix string
	// Files are the current snapshot's data files, one per manifest
	// entry, as keys (a location outside the storage stays a URI).
	Files []string
	// Ends and Seqs are the newest Spillway snapshot's spillway.offsets
	// and spillway.ledger of the topic, per partition.
	Ends, Seqs map[int32]int64
	// TopicIDs are the topic ids Ends and Seqs are of, then the topic's
	// earlier incarnations' (spillway.topic_ids); empty when the table
	// records none.
	TopicIDs []string
	// Referenced are the data files any snapshot references (older
	// ones too), as keys: never orphans, whether a ledger entry names
	// them or not.
	Referenced []string
}

// Kinds of problem the table check adds.
const (
	// ProblemTableFileUnknown: a data file of the current snapshot that no
	// ledger entry names.
	ProblemTableFileUnknown = "table_file_unknown"
	// ProblemTableFileTwice: a data file the current snapshot holds twice,
	// so readers see its records twice.
	ProblemTableFileTwice = "table_file_twice"
	// ProblemTablePastEnd: the snapshot's spillway.offsets passes the log
	// end.
	ProblemTablePastEnd = "table_past_end"
)

// TableReport is the table check of one topic.
type TableReport struct {
	Table  string `json:"table"`
	Topic  string `json:"topic"`
	Exists bool   `json:"exists"`
	// Files counts the current snapshot's data files.
	Files int `json:"files"`
	// DataPrefix is the key of the table's data folder.
	DataPrefix string `json:"data_prefix"`
	// Orphans are objects under the table's data folder that no ledger
	// entry names: uploaded by a writer that crashed before writing the
	// entry. No snapshot can hold them, so they are not a problem; they
	// can be deleted.
	Orphans     []Orphan `json:"orphans"`
	OrphanBytes int64    `json:"orphan_bytes"`

	referenced map[string]bool
}

// Orphan is a data file no ledger entry names.
type Orphan struct {
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"`
}

// NotInTable is what a partition's ledger holds past its table: the
// commit loop adds it at its next commit.
type NotInTable struct {
	// TableSeq is the table's spillway.ledger seq; -1 when it holds
	// nothing of the partition.
	TableSeq int64 `json:"table_ledger_seq"`
	Entries  int64 `json:"entries"`
	// Oldest is the first entry not in the table, its file and when it
	// was written.
	OldestSeq  int64     `json:"oldest_seq"`
	OldestKey  string    `json:"oldest_key"`
	OldestTime time.Time `json:"oldest_time"`
}

// scannedPart is one partition's scan, log and report, for the table
// check.
type scannedPart struct {
	scan   *audit.PartitionScan
	log    Log
	report *PartitionReport
}

// checkTable compares topic's table with the ledger scans of its
// partitions and their reports (index by partition), adding problems to
// those reports (or to r's, for a file of no known partition).
func checkTable(r *Report, topic string, tb *Table, scans map[int32]*scannedPart) TableReport {
	tr := TableReport{Table: tb.Name, Topic: topic, Exists: tb.Exists, Files: len(tb.Files), DataPrefix: tb.DataPrefix, Orphans: []Orphan{}, referenced: map[string]bool{}}
	for _, f := range tb.Referenced {
		tr.referenced[f] = true
	}
	for _, f := range tb.Files {
		tr.referenced[f] = true
	}
	type named struct {
		part int32
		seq  int64
	}
	// A file's seq is found by its key, one entry per key: two files of
	// one seq can't be told apart from one file held twice, which
	// table_file_twice reports.
	byKey := map[string]named{}
	parts := make([]int32, 0, len(scans))
	for p, sp := range scans {
		parts = append(parts, p)
		for _, f := range sp.scan.Named {
			byKey[f.Key] = named{p, f.Seq}
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	ends, seqs, recreated := tb.Ends, tb.Seqs, ""
	if len(tb.TopicIDs) > 0 && len(parts) > 0 {
		if live := scans[parts[0]].scan.ID.TopicID; live != "" && live != tb.TopicIDs[0] {
			// The topic was deleted and recreated since the table's last
			// commit: what it records is the old topic's, and it holds
			// nothing of this one yet.
			ends, seqs = nil, nil
			recreated = fmt.Sprintf("table %s records topic %s with id %s, but the topic's id is now %s (deleted and recreated): the table holds none of its files yet", tb.Name, topic, tb.TopicIDs[0], live)
		}
	}
	add := func(p int32, known bool, pr audit.Problem) {
		if sp, ok := scans[p]; ok && known {
			sp.report.Problems = append(sp.report.Problems, pr)
			return
		}
		r.Problems = append(r.Problems, pr)
	}
	count := map[string]int{}
	for _, f := range tb.Files {
		count[f]++
	}
	for _, f := range sortedKeys(count) {
		n, ok := byKey[f]
		if !ok {
			add(0, false, audit.Problem{Kind: ProblemTableFileUnknown, Key: f, Message: fmt.Sprintf(
				"%s is in the current snapshot of table %s (topic %s) but no ledger entry names it: the table holds records Spillway did not account for", f, tb.Name, topic)})
			continue
		}
		if c := count[f]; c > 1 {
			add(n.part, true, audit.Problem{Kind: ProblemTableFileTwice, Key: f, Message: fmt.Sprintf(
				"%s (%s/%d, ledger entry %d) is in the current snapshot of table %s %d times: readers see its records %d times", f, topic, n.part, n.seq, tb.Name, c, c)})
		}
	}
	for _, p := range parts {
		sp := scans[p]
		name := fmt.Sprintf("%s/%d", topic, p)
		if recreated != "" {
			sp.report.Notes = append(sp.report.Notes, recreated)
		}
		if end, ok := ends[p]; ok && end > sp.log.End {
			add(p, true, audit.Problem{Kind: ProblemTablePastEnd, Offsets: offsets.Ranges{{sp.log.End, end}}, Message: fmt.Sprintf(
				"table %s's current snapshot says it holds %s up to %d (spillway.offsets), past the log end %d", tb.Name, name, end, sp.log.End)})
		}
		held, any := seqs[p]
		if !any {
			held = -1
		}
		var ni *NotInTable
		for _, f := range sp.scan.Named {
			if f.Seq <= held {
				continue
			}
			if ni == nil {
				ni = &NotInTable{TableSeq: held, OldestSeq: f.Seq, OldestKey: f.Key, OldestTime: f.Time}
			}
			ni.Entries++
		}
		if ni != nil {
			sp.report.NotInTable = ni
			sp.report.Notes = append(sp.report.Notes, fmt.Sprintf(
				"%d files of ledger entries not yet in table %s (it holds up to ledger entry %d); the oldest is entry %d, %s, written %s: the commit loop adds them at its next commit",
				ni.Entries, tb.Name, held, ni.OldestSeq, ni.OldestKey, ni.OldestTime.UTC().Format(time.RFC3339)))
		}
	}
	return tr
}

// orphan reports key as an orphan of one of the tables when it lies
// under its data folder. A file no ledger entry names that a snapshot
// references is no orphan: it is not reported as one (the current
// snapshot's is table_file_unknown), and never removed.
func orphan(r *Report, key string, size int64) bool {
	for i := range r.Tables {
		tr := &r.Tables[i]
		if tr.DataPrefix != "" && strings.HasPrefix(key, tr.DataPrefix) {
			if tr.referenced[key] {
				return true
			}
			tr.Orphans = append(tr.Orphans, Orphan{Key: key, Bytes: size})
			tr.OrphanBytes += max(size, 0)
			return true
		}
	}
	return false
}
