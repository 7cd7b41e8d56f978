// Package verify checks what storage holds against Kafka, from the resume
// ledger: per partition, every offset from where the ledger begins up to
// the group's commit is in exactly one published file (or was skipped),
// the commit passes neither the log end nor what storage holds, every file
// the ledger names is there with its recorded size, and nothing under the
// prefix is unaccounted for. With a deep check it also reads every
// published file back. It reads only: it deletes and writes nothing.
//
// `spillway verify` prints its report; the demo checks its output with it.
package verify

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"

	"github.com/spillway/spillway/internal/audit"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Log is what Kafka says of one partition.
type Log struct {
	Start     int64 // log start offset
	End       int64 // high watermark
	Committed int64 // the group's committed offset; -1 without one
}

// Kafka is what Kafka says of the topics being checked.
type Kafka struct {
	Cluster  string
	TopicIDs map[string]string // topic → id, base64 as Kafka's tools print it
	Logs     map[string]map[int32]Log
}

// ReadKafka reads the cluster id, topic ids, log offsets and the group's
// commits of topics. The commits are read first, so that a group still
// consuming can't look committed past the log end.
func ReadKafka(ctx context.Context, adm *kadm.Client, group string, topics []string) (Kafka, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		// A group that never committed (kfake's answer; Kafka's is an
		// empty one): every partition is checked without a commit.
		committed, err = nil, nil
	}
	if err != nil {
		return Kafka{}, fmt.Errorf("fetch the committed offsets of group %s: %w", group, err)
	}
	meta, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return Kafka{}, fmt.Errorf("read the topics' metadata: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Kafka{}, fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return Kafka{}, fmt.Errorf("list start offsets: %w", err)
	}
	k := Kafka{Cluster: meta.Cluster, TopicIDs: map[string]string{}, Logs: map[string]map[int32]Log{}}
	for _, t := range topics {
		td, ok := meta.Topics[t]
		if !ok || td.Err != nil {
			return Kafka{}, fmt.Errorf("topic %s: no metadata: %v", t, td.Err)
		}
		k.TopicIDs[t] = base64.RawURLEncoding.EncodeToString(td.ID[:])
		k.Logs[t] = map[int32]Log{}
		for p := range td.Partitions {
			l := Log{Committed: -1}
			if o, ok := ends.Lookup(t, p); ok {
				l.End = o.Offset
			}
			if o, ok := starts.Lookup(t, p); ok {
				l.Start = o.Offset
			}
			if o, ok := committed.Lookup(t, p); ok && o.Err == nil {
				l.Committed = o.At
			}
			k.Logs[t][p] = l
		}
	}
	return k, nil
}

// Options say what to check.
type Options struct {
	Names naming.Names
	// Deep, when set, reads every published file back.
	Deep *audit.DeepOptions
	// Foreign says files no ledger entry names were written by another
	// writer before Spillway took over (storage.earlier_files: foreign,
	// after a cut-over from Kafka Connect): those below where their
	// partition's ledger begins, or of a partition without one, are
	// counted in Report.EarlierFiles, and offsets below the group's
	// commit of a partition without a ledger are theirs, not checked.
	Foreign bool
	// ReadsBack says resume reads back the last file of a partition
	// without a ledger (storage.earlier_files: spillway), so that verify
	// says what resume does with a file no entry names.
	ReadsBack bool
	// NotData, when set, says which objects under the prefix are no data
	// files (config.IcebergNotData: tables' metadata, a SQL catalog).
	NotData func(key string) bool
	// Table, when set (iceberg.table), reads topic's Iceberg table: its
	// current snapshot is checked against the ledger and the log.
	Table func(ctx context.Context, topic string) (*Table, error)
}

// Run reads Kafka, then storage, and reports.
func Run(ctx context.Context, st ledger.Store, adm *kadm.Client, group string, topics []string, opts Options) (Report, error) {
	k, err := ReadKafka(ctx, adm, group, topics)
	if err != nil {
		return Report{}, err
	}
	return Check(ctx, st, k, opts)
}

// Kinds of problem that Check adds to the scan's, from Kafka's offsets.
const (
	// ProblemPastEnd: the group committed past the log end.
	ProblemPastEnd = "committed_past_end"
	// ProblemPastLedger: the group committed offsets the ledger doesn't
	// say are handled.
	ProblemPastLedger = "committed_past_ledger"
	// ProblemHeadMissing: the last entry's file is not published, though
	// the group committed offsets of it.
	ProblemHeadMissing = "head_missing"
	// ProblemGap: offsets below the commit that no published file holds
	// and that were not skipped.
	ProblemGap = "gap"
)

// Check scans storage and compares it with k. Read k before calling it.
func Check(ctx context.Context, st ledger.Store, k Kafka, opts Options) (Report, error) {
	scan, err := audit.NewScan(ctx, st, opts.Names)
	if err != nil {
		return Report{}, err
	}
	if opts.NotData != nil {
		scan.Drop(opts.NotData)
	}
	r := Report{OK: true, Cluster: k.Cluster, Prefix: opts.Names.Prefix, Deep: opts.Deep != nil}
	if opts.Names.Template.LatestPerKey() {
		return checkKeyed(scan, k, r), nil
	}
	topics := make([]string, 0, len(k.Logs))
	for t := range k.Logs {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	configured := map[string]bool{}
	type scanned struct {
		topic string
		ps    *audit.PartitionScan
		log   Log
	}
	var scans []scanned
	ledgerStart := map[topicPartition]int64{}
	for _, t := range topics {
		configured[t] = true
		parts := make([]int32, 0, len(k.Logs[t]))
		for p := range k.Logs[t] {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, p := range parts {
			id := ledger.Identity{Cluster: k.Cluster, Topic: t, TopicID: k.TopicIDs[t], Partition: p}
			ps, err := scan.Partition(ctx, id, opts.Deep)
			if err != nil {
				return Report{}, fmt.Errorf("%s/%d: %w", t, p, err)
			}
			ledgerStart[topicPartition{t, p}] = ps.Start
			pr := compare(ps, k.Logs[t][p], opts.Foreign)
			r.Partitions = append(r.Partitions, pr)
			scans = append(scans, scanned{t, ps, k.Logs[t][p]})
		}
		foreign, err := scan.ForeignLedgers(ctx, t, k.TopicIDs[t])
		if err != nil {
			return Report{}, fmt.Errorf("%s: %w", t, err)
		}
		r.Problems = append(r.Problems, foreign...)
	}
	if opts.Table != nil {
		// r.Partitions is complete: pointers into it stay valid.
		byTopic := map[string]map[int32]*scannedPart{}
		for i, s := range scans {
			if byTopic[s.topic] == nil {
				byTopic[s.topic] = map[int32]*scannedPart{}
			}
			byTopic[s.topic][s.ps.ID.Partition] = &scannedPart{scan: s.ps, log: s.log, report: &r.Partitions[i]}
		}
		for _, t := range topics {
			tb, err := opts.Table(ctx, t)
			if err != nil {
				return Report{}, fmt.Errorf("%s: %w", t, err)
			}
			r.Tables = append(r.Tables, checkTable(&r, t, tb, byTopic[t]))
		}
	}
	for i := range r.Partitions {
		pr := &r.Partitions[i]
		pr.OK = len(pr.Problems) == 0
		r.OK = r.OK && pr.OK
	}
	for _, p := range scan.Unknown(configured) {
		if p.Kind == audit.ProblemUnknownFile && orphan(&r, p.Key, scan.Size(p.Key)) {
			continue
		}
		if n, ok := opts.Names.Parse(p.Key); ok && p.Kind == audit.ProblemUnknownFile {
			start, known := ledgerStart[topicPartition{n.Vars.Topic, n.Vars.Partition}]
			if opts.Foreign && known && (start < 0 || n.Vars.StartOffset < start) {
				r.EarlierFiles++
				continue
			}
			if opts.ReadsBack && known && start < 0 {
				p.Message += "; resume reads the partition's last such file back to find where it starts (storage.earlier_files: spillway)"
			} else {
				p.Message += "; it never moves where resume starts. Move it out of storage.prefix if Spillway did not write it"
			}
		}
		r.Problems = append(r.Problems, p)
	}
	r.OK = r.OK && len(r.Problems) == 0
	if r.Problems == nil {
		r.Problems = []audit.Problem{}
	}
	return r, nil
}

// checkKeyed checks the one-object-per-key layout. It keeps no ledger and
// its objects are replaced, so there are no offsets to account for: what
// can be checked is that the commit doesn't pass the log end and that every
// object under the prefix is named by the template.
func checkKeyed(scan *audit.Scan, k Kafka, r Report) Report {
	counts, unknown := scan.KeyedObjects()
	for _, t := range sortedKeys(k.Logs) {
		parts := make([]int32, 0, len(k.Logs[t]))
		for p := range k.Logs[t] {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, p := range parts {
			l := k.Logs[t][p]
			c := counts[t][p]
			pr := PartitionReport{
				Topic: t, Partition: p, TopicID: k.TopicIDs[t],
				LogStart: l.Start, End: l.End, Committed: l.Committed,
				LedgerEntries: 0, LedgerStart: -1, Handled: -1,
				Files: c[0], Bytes: c[1], Problems: []audit.Problem{},
			}
			if l.Committed > l.End {
				pr.Problems = append(pr.Problems, pastEnd(fmt.Sprintf("%s/%d", t, p), l))
			}
			pr.OK = len(pr.Problems) == 0
			r.OK = r.OK && pr.OK
			r.Partitions = append(r.Partitions, pr)
		}
	}
	r.Problems = append([]audit.Problem{}, unknown...)
	r.OK = r.OK && len(r.Problems) == 0
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type topicPartition struct {
	topic     string
	partition int32
}

// compare checks one partition's scan against its log. foreign is
// Options.Foreign.
func compare(ps *audit.PartitionScan, l Log, foreign bool) PartitionReport {
	pr := PartitionReport{
		Topic: ps.ID.Topic, Partition: ps.ID.Partition, TopicID: ps.ID.TopicID,
		LogStart: l.Start, End: l.End, Committed: l.Committed,
		LedgerEntries: ps.Entries, LedgerStart: ps.Start,
		Handled: ps.Handled.Next, HandledAbove: ps.Handled.Above,
		Files: ps.Files, Records: ps.Records, Bytes: ps.Bytes,
		Ranges: ps.Stored, Skipped: ps.Skipped,
		Duplicates: ps.Duplicates.Count(), DuplicateRanges: ps.Duplicates,
		Deep:     ps.Deep,
		Problems: ps.Problems,
		Notes:    ps.Notes,
	}
	if ps.Start < 0 {
		pr.Handled = -1
	}
	for _, g := range ps.Gaps {
		switch g.Cause {
		case offsets.GapRetention:
			pr.Lost = pr.Lost.Union(g.Ranges)
		case offsets.GapOperator:
			pr.OperatorSkipped = pr.OperatorSkipped.Union(g.Ranges)
			note := fmt.Sprintf("offsets %s were skipped by an operator (ledger entry %s)", offsets.FormatRanges(g.Ranges), g.Entry)
			if g.Note != "" {
				note += ": " + g.Note
			}
			pr.Notes = append(pr.Notes, note)
		}
	}
	add := func(p audit.Problem) { pr.Problems = append(pr.Problems, p) }
	name := fmt.Sprintf("%s/%d", ps.ID.Topic, ps.ID.Partition)
	if l.Committed > l.End {
		add(pastEnd(name, l))
	}
	// Offsets below the ledger's beginning were handled before it (by an
	// earlier version) or never consumed (a group that started at the
	// log end): there is nothing to check them against.
	from := l.Start
	if ps.Start >= 0 {
		from = max(from, ps.Start)
	} else if foreign {
		// No ledger: what lies below the commit is the earlier writer's.
		from = max(from, l.Committed)
	}
	if l.Committed > from {
		want := offsets.Ranges{{from, l.Committed}}
		handled := ps.Handled.Ranges()
		if ps.Start < 0 {
			handled = nil
		}
		if past := want.Subtract(handled); len(past) > 0 {
			add(audit.Problem{Kind: ProblemPastLedger, Offsets: past, Message: fmt.Sprintf(
				"the group committed %d in %s, but the ledger says only %s is handled: offsets %s were committed without being stored",
				l.Committed, name, handledText(ps), offsets.FormatRanges(past))})
		}
		if ps.Pending != nil {
			if head := ps.Pending.File.Ranges.Overlap(want); len(head) > 0 {
				add(audit.Problem{Kind: ProblemHeadMissing, Key: ps.Pending.File.Key, Offsets: head, Message: fmt.Sprintf(
					"%s, the last file of %s in the ledger (entry %d), is not in storage, but the group committed offsets %s of it: they are lost unless the file is restored",
					ps.Pending.File.Key, name, ps.Pending.Seq, offsets.FormatRanges(head))})
			}
		}
		pr.Gaps = want.Subtract(ps.Stored).Subtract(ps.Skipped).Subtract(pr.Lost).Subtract(pr.OperatorSkipped)
		if len(pr.Gaps) > 0 {
			add(audit.Problem{Kind: ProblemGap, Offsets: pr.Gaps, Message: fmt.Sprintf(
				"%d offsets of %s below the commit %d are in no published file and were not skipped: %s",
				pr.Gaps.Count(), name, l.Committed, offsets.FormatRanges(pr.Gaps))})
		}
	}
	pr.OK = len(pr.Problems) == 0
	if pr.Problems == nil {
		pr.Problems = []audit.Problem{}
	}
	return pr
}

func pastEnd(name string, l Log) audit.Problem {
	return audit.Problem{Kind: ProblemPastEnd, Offsets: offsets.Ranges{{l.End, l.Committed}}, Message: fmt.Sprintf(
		"the group committed %d in %s, past the log end %d: the records there don't exist, so a future record below %d would never be consumed; reset the group's offset",
		l.Committed, name, l.End, l.Committed)}
}

func handledText(ps *audit.PartitionScan) string {
	if ps.Start < 0 {
		return "nothing (there is no ledger)"
	}
	s := fmt.Sprintf("everything below %d", ps.Handled.Next)
	if len(ps.Handled.Above) > 0 {
		s += " and " + offsets.FormatRanges(ps.Handled.Above)
	}
	return s
}
