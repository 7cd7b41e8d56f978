// Package audit checks what storage holds against the ledger: a Scan
// walks a partition's entries and the files they name, and reports each
// Problem (a missing or void file, offsets stored twice or lost, a size
// or checksum that differs), reading files back with a deep scan. It is
// verify's storage side; resume reads the same ledger in package ledger,
// and the two share ledger.ZombieFirst, so that verify explains what
// resume accepts. It only reads.
package audit

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/readback"
	"github.com/spillway/spillway/internal/storage"
)

// Kinds of Problem a Scan finds.
const (
	// ProblemCorruptEntry: a ledger object that can't be read as an entry
	// of its partition.
	ProblemCorruptEntry = "corrupt_entry"
	// ProblemEntryMissing: sequence numbers missing between entries.
	ProblemEntryMissing = "entry_missing"
	// ProblemForeignCluster: an entry written for another Kafka cluster.
	ProblemForeignCluster = "foreign_cluster"
	// ProblemLedgerInconsistent: a later entry's state holds part of an
	// earlier entry's runs, not all or none of them; or two published
	// entries name one file (a template other than latest-per-key).
	ProblemLedgerInconsistent = "ledger_inconsistent"
	// ProblemFileMissing: the file of an entry that a later entry says was
	// published is not in storage.
	ProblemFileMissing = "file_missing"
	// ProblemSizeMismatch: the file is not of the size its entry records.
	ProblemSizeMismatch = "size_mismatch"
	// ProblemVoidFilePresent: an entry's file was published after a later
	// entry was written without it (a writer that lost the partition
	// published late): its records are stored twice.
	ProblemVoidFilePresent = "void_file_present"
	// ProblemDuplicate: offsets held by two published files.
	ProblemDuplicate = "duplicate"
	// ProblemUnreadable: records of a published file that can't be read
	// (deep scan).
	ProblemUnreadable = "unreadable_record"
	// ProblemOffsetOutside: records whose offset is not in their entry's
	// runs, or is there twice (deep scan).
	ProblemOffsetOutside = "offset_outside_runs"
	// ProblemRecordCount: a file holds another number of records than its
	// entry says (deep scan).
	ProblemRecordCount = "record_count"
	// ProblemChecksumMismatch: a file's bytes are not those its entry
	// recorded the CRC-32C of, though their size is (deep scan).
	ProblemChecksumMismatch = "checksum_mismatch"
	// ProblemUnknownFile: an object under the prefix that no ledger entry
	// names.
	ProblemUnknownFile = "unknown_file"
	// ProblemForeignLedger: a ledger of another topic id of a topic.
	ProblemForeignLedger = "foreign_ledger"
	// ProblemLost: offsets the ledger records as deleted from the log
	// before they were stored (a Gap of cause GapRetention).
	ProblemLost = "lost"
)

// Problem is one thing wrong in storage.
type Problem struct {
	Kind string `json:"kind"`
	// Key is the object at fault: a data file, or a ledger entry or
	// directory.
	Key string `json:"key,omitempty"`
	// Entry is the ledger entry that names Key, when Key is a data file.
	Entry   string         `json:"ledger_entry,omitempty"`
	Offsets offsets.Ranges `json:"offsets,omitempty"`
	// Record is the index in the file of the first record at fault.
	Record  *int64 `json:"record,omitempty"`
	Message string `json:"message"`
}

// DeepOptions say how to read published files back.
type DeepOptions struct {
	// OffsetField says that records carry their offset in a top-level
	// "offset" member (format.envelope with offset in format.fields), so
	// each one can be checked against its entry's runs.
	OffsetField bool
	// CSVFields is format.fields: the columns of csv files, in order,
	// without which they can't be read back. The column named offset is
	// each record's offset.
	CSVFields []string
}

// DeepStats is what a deep scan read.
type DeepStats struct {
	Files      int64        `json:"files_read"`
	Records    int64        `json:"records_read"`
	NotChecked []NotChecked `json:"not_checked,omitempty"`
}

// NotChecked counts published files, or parts of them, that a deep scan
// could not check, and says why.
type NotChecked struct {
	Why     string `json:"why"`
	Files   int64  `json:"files"`
	Example string `json:"example"`
}

// PartitionScan is what storage holds for one partition, by its ledger.
type PartitionScan struct {
	ID ledger.Identity
	// Entries is the number of valid entries of this cluster.
	Entries int64
	// Start is where the ledger begins: the first entry's state. Offsets
	// below it were handled before the ledger (or never consumed). -1
	// when the partition has no ledger.
	Start int64
	// Handled is what the ledger says is handled now.
	Handled offsets.State
	// Files, Records and Bytes count published files, as their entries
	// say.
	Files, Records, Bytes int64
	// Stored are the offsets of published files of the recorded size.
	Stored offsets.Ranges
	// Skipped are offsets handled without a file: skipped by the error
	// policy, or passed by a group whose offset was moved forward. A
	// ledger records them with the next file, so those after the last
	// file are not known.
	Skipped offsets.Ranges
	// Gaps are what the ledger records as passed without a file, and why
	// (retention, an operator's skip), in entry order.
	Gaps []ScannedGap
	// Duplicates are offsets stored in two files.
	Duplicates offsets.Ranges
	// Pending is the last entry when its file is not published (the
	// writer stopped between the two steps).
	Pending *ledger.Entry
	// Notes say what was found and explained, not a problem: a paused
	// writer's file published late under a name entered again.
	Notes    []string
	Problems []Problem
	// Deep is set by a deep scan.
	Deep *DeepStats
	// Named are the entries of this cluster with a file, in ledger order:
	// what verify compares an Iceberg table's files with.
	Named []NamedFile
}

// NamedFile is a data file as its ledger entry names it.
type NamedFile struct {
	Seq  int64
	Key  string
	Time time.Time // when the entry was written
}

// Scan reads what storage holds under a prefix, for verify: the objects
// under it, every ledger entry of the partitions asked for, and with a
// deep scan every published file. It never writes or deletes anything.
type Scan struct {
	st      ledger.Store
	ledger  *ledger.Ledger
	names   naming.Names
	objects map[string]int64 // data objects (not under ledger.StateDir) and their sizes
	named   map[string]bool  // objects a ledger entry read so far names
}

// NewScan lists the objects under names.Prefix. Do it after reading
// Kafka's offsets and before the ledger: a running writer then can't make
// a file look missing or unknown, nor a commit look ahead of storage.
func NewScan(ctx context.Context, st ledger.Store, names naming.Names) (*Scan, error) {
	s := &Scan{st: st, ledger: ledger.New(st, names.Prefix), names: names, objects: map[string]int64{}, named: map[string]bool{}}
	own := names.Prefix + ledger.StateDir
	err := st.List(ctx, names.Prefix, func(o storage.Object) error {
		// Dot names are storage's own (the startup probe, temp files),
		// never data.
		if !strings.HasPrefix(o.Key, own) && !strings.HasPrefix(path.Base(o.Key), ".") {
			s.objects[o.Key] = o.Size
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// object returns the size of the object under key, looking it up when the
// listing, taken before the ledger was read, didn't have it.
func (s *Scan) object(ctx context.Context, key string) (int64, bool, error) {
	if n, ok := s.objects[key]; ok {
		return n, true, nil
	}
	o, ok, err := s.st.Stat(ctx, key)
	if err != nil || !ok {
		return 0, false, err
	}
	s.objects[key] = o.Size
	return o.Size, true, nil
}

// ScannedGap is a Gap and the ledger entry that records it.
type ScannedGap struct {
	offsets.Gap
	Entry string `json:"ledger_entry"`
}

type scanned struct {
	key string
	e   *ledger.Entry
}

// Partition reads every ledger entry of a partition, checks each against
// the next and against storage, and with deep set reads every published
// file back.
func (s *Scan) Partition(ctx context.Context, id ledger.Identity, deep *DeepOptions) (*PartitionScan, error) {
	ps := &PartitionScan{ID: id, Start: -1}
	if deep != nil {
		ps.Deep = &DeepStats{}
	}
	items, err := s.readEntries(ctx, id, ps)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return ps, nil
	}
	ps.Start = items[0].e.Before.Next
	ps.Entries = int64(len(items))
	w := &walk{s: s, ps: ps, items: items, deep: deep,
		lastNaming: make(map[string]int, len(items)), bySeq: make(map[int64]*ledger.Entry, len(items))}
	for i, it := range items {
		if it.e.HasFile() {
			w.lastNaming[it.e.File.Key] = i
			ps.Named = append(ps.Named, NamedFile{Seq: it.e.Seq, Key: it.e.File.Key, Time: it.e.Time})
		}
		w.bySeq[it.e.Seq] = it.e
	}
	for i := range items {
		if err := w.entry(ctx, i); err != nil {
			return nil, err
		}
	}
	last := items[len(items)-1].e
	switch {
	case w.lateHead != nil:
		ps.Handled = w.lateHead.State()
	case ps.Pending != nil:
		ps.Handled = last.Before
	default:
		ps.Handled = last.After()
	}
	return ps, nil
}

// readEntries reads a partition's ledger entries in order, leaving out
// (as problems) those that can't be read or are another cluster's, and
// reports the sequence numbers missing between them.
func (s *Scan) readEntries(ctx context.Context, id ledger.Identity, ps *PartitionScan) ([]scanned, error) {
	var items []scanned
	var seqs []int64
	err := s.ledger.Entries(ctx, id, func(key string, e *ledger.Entry, err error) error {
		if seq, ok := s.ledger.EntrySeq(id, key); ok {
			seqs = append(seqs, seq)
		}
		if err != nil {
			ps.problem(Problem{Kind: ProblemCorruptEntry, Key: key, Message: err.Error()})
			return nil
		}
		if e.HasFile() {
			s.named[e.File.Key] = true
		}
		if e.Cluster != id.Cluster {
			ps.problem(Problem{Kind: ProblemForeignCluster, Key: key, Message: fmt.Sprintf(
				"ledger entry %d was written for Kafka cluster %s, but the cluster being checked is %s: the prefix holds another cluster's data (copied, or written by a deployment pointed at another cluster); its file %s is not checked",
				e.Seq, e.Cluster, id.Cluster, e.File.Key)})
			return nil
		}
		items = append(items, scanned{key, e})
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.missingSeqs(ps, id, seqs)
	return items, nil
}

// walk is one partition's scan going through its entries in order: what
// an entry's check needs of the others, and what the checks so far found.
type walk struct {
	s     *Scan
	ps    *PartitionScan
	items []scanned
	deep  *DeepOptions
	// lastNaming is the index of the last entry naming each file, bySeq
	// each entry by its sequence number.
	lastNaming map[string]int
	bySeq      map[int64]*ledger.Entry
	stored     []scanned
	// lateHead is the late writer's file that the last entry's name holds.
	lateHead *ledger.LateFile
}

// next is the entry after items[i] when it directly follows it.
func (w *walk) next(i int) (*ledger.Entry, bool) {
	if i+1 < len(w.items) && w.items[i+1].e.Seq == w.items[i].e.Seq+1 {
		return w.items[i+1].e, true
	}
	return nil, false
}

// entry checks items[i] against the next entry and against storage.
func (w *walk) entry(ctx context.Context, i int) error {
	ps, it := w.ps, w.items[i]
	e, last := it.e, i == len(w.items)-1
	if !e.HasFile() {
		// Gaps alone: nothing was to be published.
		if n, ok := w.next(i); ok {
			skipped := n.Before.Ranges().Subtract(e.Before.Ranges()).Subtract(e.GapRanges())
			ps.Skipped = ps.Skipped.Union(skipped.From(ps.Start))
		}
		ps.gaps(it)
		return nil
	}
	size, exists, err := w.s.object(ctx, e.File.Key)
	if err != nil {
		return err
	}
	// The file under e's name may be an earlier entry's, published
	// late by a writer that had lost the partition: resume's rule
	// (ledger.ZombieFirst), so that verify explains what resume accepts.
	var late *ledger.LateFile
	if exists && size != e.File.Bytes && w.lastNaming[e.File.Key] == i {
		if z, ok := ledger.ZombieFirst(e, size, func(seq int64) (*ledger.Entry, bool) { e, ok := w.bySeq[seq]; return e, ok }); ok {
			late = &z
		}
	}
	runs := e.File.Ranges
	if late != nil {
		runs = late.File.File.Ranges
	}
	if n, ok := w.next(i); ok {
		// What the next entry's state adds to this one's, besides
		// this file, was handled without a file. Across a missing or
		// corrupt entry that can't be told, and is left out: it
		// shows as a gap.
		skipped := n.Before.Ranges().Subtract(e.Before.Ranges()).Subtract(runs).Subtract(e.GapRanges())
		ps.Skipped = ps.Skipped.Union(skipped.From(ps.Start))
	}
	if late != nil {
		w.stored, err = w.s.storeLate(ctx, ps, w.stored, *late, w.deep)
		if last {
			w.lateHead = late
		}
		return err
	}
	if w.void(i, exists) {
		return nil
	}
	ps.gaps(it)
	return w.published(ctx, i, size, exists)
}

// void tells whether items[i]'s file was never published (the next entry
// was written without it, or it is the last entry's and not in storage),
// and reports it when it is stored all the same.
func (w *walk) void(i int, exists bool) bool {
	ps, it := w.ps, w.items[i]
	e, last := it.e, i == len(w.items)-1
	void := last && !exists
	if !last {
		next := w.items[i+1].e.Before
		switch in := next.Ranges().Overlap(e.File.Ranges).Count(); {
		case in == 0:
			void = true
		case in < e.File.Ranges.Count():
			ps.problem(Problem{Kind: ProblemLedgerInconsistent, Key: w.items[i+1].key, Entry: it.key, Offsets: e.File.Ranges.Subtract(next.Ranges()), Message: fmt.Sprintf(
				"ledger entry %d's state holds only part of the runs of entry %d's file %s: Spillway never writes that; the ledger was changed by hand or is damaged",
				w.items[i+1].e.Seq, e.Seq, e.File.Key)})
		}
	}
	if !void {
		return false
	}
	if last {
		ps.Pending = e
	}
	if exists && w.lastNaming[e.File.Key] == i {
		ps.problem(Problem{Kind: ProblemVoidFilePresent, Key: e.File.Key, Entry: it.key, Offsets: e.File.Ranges, Message: fmt.Sprintf(
			"%s is stored, but the ledger entry after its own (%d) was written without it: a writer that had lost the partition published it late, and its records were stored again by a later file; delete it",
			e.File.Key, e.Seq)})
		w.stored = ps.store(w.stored, it)
	}
	return true
}

// published checks the file of items[i], which the ledger says was
// published, against storage, and with deep set reads it back.
func (w *walk) published(ctx context.Context, i int, size int64, exists bool) error {
	ps, it := w.ps, w.items[i]
	e := it.e
	if w.lastNaming[e.File.Key] != i {
		if w.s.names.Template.LatestPerKey() {
			// One object per key, overwritten by a later file: its
			// records were stored, then replaced, as that layout
			// promises.
			ps.Records += e.File.Records
			ps.Stored = ps.Stored.Union(e.File.Ranges)
		} else {
			ps.problem(Problem{Kind: ProblemLedgerInconsistent, Key: e.File.Key, Entry: it.key, Offsets: e.File.Ranges, Message: fmt.Sprintf(
				"ledger entry %d and a later published entry both name %s, but Spillway never writes a file twice with file.name_template %q: the ledger was changed by hand or is damaged",
				e.Seq, e.File.Key, w.s.names.Template)})
		}
		return nil
	}
	switch {
	case !exists:
		ps.problem(Problem{Kind: ProblemFileMissing, Key: e.File.Key, Entry: it.key, Offsets: e.File.Ranges, Message: fmt.Sprintf(
			"%s is not in storage, but ledger entry %d names it and a later entry says it was published: it was deleted or moved; restore it from a backup",
			e.File.Key, e.Seq)})
	case size != e.File.Bytes:
		ps.problem(Problem{Kind: ProblemSizeMismatch, Key: e.File.Key, Entry: it.key, Offsets: e.File.Ranges, Message: fmt.Sprintf(
			"%s holds %d bytes, but ledger entry %d says Spillway wrote %d: something other than Spillway changed or truncated it; restore it from a backup",
			e.File.Key, size, e.Seq, e.File.Bytes)})
	default:
		ps.Files++
		ps.Records += e.File.Records
		ps.Bytes += e.File.Bytes
		w.stored = ps.store(w.stored, it)
		if w.deep != nil {
			return w.s.read(ctx, ps, it, *w.deep)
		}
	}
	return nil
}

// storeLate counts the file of a late writer's entry (LateFile.File) as
// published under the name its void entry gave again: stored, or, when
// the new owner stored some of its offsets again, a duplicate naming the
// file to delete, as resume's error does.
func (s *Scan) storeLate(ctx context.Context, ps *PartitionScan, stored []scanned, z ledger.LateFile, deep *DeepOptions) ([]scanned, error) {
	j := z.File
	it := scanned{s.ledger.EntryKey(ps.ID, j.Seq), j}
	ps.Files++
	ps.Records += j.File.Records
	ps.Bytes += j.File.Bytes
	ps.Notes = append(ps.Notes, fmt.Sprintf("%s holds the file of ledger entry %d, not of entry %d: %s", j.File.Key, j.Seq, z.Void.Seq, z.Why()))
	if len(z.Dup) > 0 {
		ps.Duplicates = ps.Duplicates.Union(z.Dup)
		ps.problem(Problem{Kind: ProblemDuplicate, Key: j.File.Key, Entry: it.key, Offsets: z.Dup, Message: z.DupMessage()})
		ps.Stored = ps.Stored.Union(j.File.Ranges)
		stored = append(stored, it)
	} else {
		stored = ps.store(stored, it)
	}
	if deep != nil {
		if err := s.read(ctx, ps, it, *deep); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

func (ps *PartitionScan) problem(p Problem) { ps.Problems = append(ps.Problems, p) }

// gaps records the gaps of an entry whose state holds: a loss is a
// problem, an operator's skip is only reported.
func (ps *PartitionScan) gaps(it scanned) {
	for _, g := range it.e.Gaps {
		ps.Gaps = append(ps.Gaps, ScannedGap{Gap: g, Entry: it.key})
		if g.Cause == offsets.GapRetention {
			ps.problem(Problem{Kind: ProblemLost, Entry: it.key, Offsets: g.Ranges, Message: fmt.Sprintf(
				"%d offsets of %s/%d, %s, were deleted from the log before Spillway stored them (retention, DeleteRecords, or an unclean leader election truncated it): they are in no file and can't be consumed any more. Ledger entry %d records it. Keep the topic's retention above the longest time Spillway may be down or behind",
				g.Ranges.Count(), ps.ID.Topic, ps.ID.Partition, offsets.FormatRanges(g.Ranges), it.e.Seq)})
		}
	}
}

// store adds a published file's runs to ps.Stored, and reports the offsets
// an earlier file holds too.
func (ps *PartitionScan) store(stored []scanned, it scanned) []scanned {
	if dup := ps.Stored.Overlap(it.e.File.Ranges); len(dup) > 0 {
		ps.Duplicates = ps.Duplicates.Union(dup)
		var others []string
		for _, o := range stored {
			if len(o.e.File.Ranges.Overlap(dup)) > 0 {
				others = append(others, o.e.File.Key)
			}
		}
		ps.problem(Problem{Kind: ProblemDuplicate, Key: it.e.File.Key, Entry: it.key, Offsets: dup, Message: fmt.Sprintf(
			"%d offsets of %s are also stored in %s", dup.Count(), it.e.File.Key, strings.Join(others, ", "))})
	}
	ps.Stored = ps.Stored.Union(it.e.File.Ranges)
	return append(stored, it)
}

// missingSeqs reports sequence numbers missing below the highest: entries
// are written one after another from 0, and never deleted by Spillway.
func (s *Scan) missingSeqs(ps *PartitionScan, id ledger.Identity, seqs []int64) {
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	next := int64(0)
	for _, q := range seqs {
		if q > next {
			ps.problem(Problem{Kind: ProblemEntryMissing, Key: s.ledger.EntryKey(id, next), Message: fmt.Sprintf(
				"ledger entries %d to %d are missing, but entry %d exists: they were deleted; the files they named can't be checked, and resume can't be trusted below entry %d", next, q-1, q, q)})
		}
		next = max(next, q+1)
	}
}

// read reads a published file back and checks it against its entry.
func (s *Scan) read(ctx context.Context, ps *PartitionScan, it scanned, opts DeepOptions) error {
	e := it.e
	var n, bad, outside, noOffset int64
	firstBad, firstOutside := int64(-1), int64(-1)
	var badErr error
	var seen offsets.Ranges
	sr := &summingReader{st: s.st}
	err := readback.Records(ctx, sr, e.File.Key, s.names.ContentExts(e.File.Key), opts.CSVFields, func(r readback.Record) error {
		n++
		switch {
		case r.Err != nil:
			if bad == 0 {
				firstBad, badErr = r.Index, r.Err
			}
			bad++
		case !opts.OffsetField:
		case !r.HasOffset:
			noOffset++
		case !e.File.Ranges.Contains(r.Offset) || seen.Contains(r.Offset):
			if outside == 0 {
				firstOutside = r.Index
			}
			outside++
		default:
			seen = seen.Add(r.Offset, r.Offset+1)
		}
		return nil
	})
	if cerr := s.checkSum(ps, it, sr); cerr != nil && err == nil {
		return cerr
	}
	var unsupported *readback.UnsupportedError
	var broken *readback.ReadError
	switch {
	case errors.As(err, &unsupported):
		ps.Deep.notChecked(unsupported.Why, e.File.Key)
		return nil
	case errors.As(err, &broken):
		rec := broken.Record
		ps.problem(Problem{Kind: ProblemUnreadable, Key: e.File.Key, Entry: it.key, Record: &rec, Message: fmt.Sprintf(
			"%s can't be read past record %d: %v", e.File.Key, rec, broken.Err)})
	case err != nil:
		return err
	}
	ps.Deep.Files++
	ps.Deep.Records += n
	if bad > 0 {
		ps.problem(Problem{Kind: ProblemUnreadable, Key: e.File.Key, Entry: it.key, Record: &firstBad, Message: fmt.Sprintf(
			"%s holds records that can't be read: record %d (the first of %d): %v", e.File.Key, firstBad, bad, badErr)})
	}
	if outside > 0 {
		ps.problem(Problem{Kind: ProblemOffsetOutside, Key: e.File.Key, Entry: it.key, Record: &firstOutside, Message: fmt.Sprintf(
			"%s holds records whose offset its ledger entry %d doesn't give it (%s), or that it holds twice: record %d (the first of %d)",
			e.File.Key, e.Seq, offsets.FormatRanges(e.File.Ranges), firstOutside, outside)})
	}
	if err == nil && n != e.File.Records {
		ps.problem(Problem{Kind: ProblemRecordCount, Key: e.File.Key, Entry: it.key, Message: fmt.Sprintf(
			"%s holds %d records, but its ledger entry %d says %d", e.File.Key, n, e.Seq, e.File.Records)})
	}
	switch {
	case !opts.OffsetField:
		ps.Deep.notChecked("format.fields has no offset (or format.envelope is false): records are read and counted, their offsets not checked", e.File.Key)
	case noOffset > 0:
		ps.Deep.notChecked("records have no offset field (written while format.fields had none): they are read and counted, their offsets not checked", e.File.Key)
	}
	return nil
}

// notSummed is why a file written before ledger entries had a checksum
// is checked as before.
const notSummed = "their ledger entries have no checksum (written before Spillway recorded file.crc32c): sizes are checked and records read back, but an edit that keeps a file's size can't be seen"

// checkSum compares the CRC-32C of the bytes sr read with the one its
// entry recorded. An error is storage's, reading past what the records'
// reader read.
func (s *Scan) checkSum(ps *PartitionScan, it scanned, sr *summingReader) error {
	e := it.e
	sum, ok, err := sr.sum()
	switch {
	case err != nil:
		return fmt.Errorf("read %s to its end for its checksum: %w", e.File.Key, err)
	case !ok:
		// It couldn't be read: the records' reader says why.
		return nil
	case e.File.CRC32C == "":
		ps.Deep.notChecked(notSummed, e.File.Key)
	case ledger.FormatCRC32C(sum) != e.File.CRC32C:
		ps.problem(Problem{Kind: ProblemChecksumMismatch, Key: e.File.Key, Entry: it.key, Offsets: e.File.Ranges, Message: fmt.Sprintf(
			"%s has the size its ledger entry %d records (%d bytes), but its CRC-32C is %s where the entry says Spillway wrote %s: something other than Spillway changed its bytes in place; restore it from a backup",
			e.File.Key, e.Seq, e.File.Bytes, ledger.FormatCRC32C(sum), e.File.CRC32C)})
	}
	return nil
}

func (d *DeepStats) notChecked(why, key string) {
	for i := range d.NotChecked {
		if d.NotChecked[i].Why == why {
			d.NotChecked[i].Files++
			return
		}
	}
	d.NotChecked = append(d.NotChecked, NotChecked{Why: why, Files: 1, Example: key})
}

// ForeignLedgers reports the ledgers of topic kept for topic ids other than
// topicID (the topic was deleted and recreated, or the prefix holds another
// cluster's data). Their files are counted, not checked, and are not
// reported as unknown.
func (s *Scan) ForeignLedgers(ctx context.Context, topic, topicID string) ([]Problem, error) {
	ids, err := s.ledger.TopicIDs(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, other := range ids {
		if other == topicID {
			continue
		}
		dir := s.ledger.TopicDir(topic) + other + "/"
		var parts []int32
		err := s.st.ListDir(ctx, dir, func(o storage.Object) error {
			if p, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(o.Key, dir), "/"), 10, 32); o.Dir && err == nil {
				parts = append(parts, int32(p))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		var entries, files int64
		for _, p := range parts {
			id := ledger.Identity{Topic: topic, TopicID: other, Partition: p}
			err := s.ledger.Entries(ctx, id, func(_ string, e *ledger.Entry, err error) error {
				if err == nil {
					entries++
					if _, ok := s.objects[e.File.Key]; ok && !s.named[e.File.Key] {
						files++
					}
					s.named[e.File.Key] = true
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		out = append(out, Problem{Kind: ProblemForeignLedger, Key: dir, Message: fmt.Sprintf(
			"a ledger of topic %s with topic id %s (entries: %d, partitions: %d, stored files it names: %d) is kept beside the one of the topic now, whose id is %s: the topic was deleted and recreated (or the prefix holds another cluster's data), and its files are not checked; move them and %s out of the prefix once they are no longer needed",
			topic, other, entries, len(parts), files, topicID, dir)})
	}
	return out, nil
}

// Drop leaves out of the scan the objects notData says are no data files
// (an Iceberg table's metadata, its SQL catalog's file).
func (s *Scan) Drop(notData func(key string) bool) {
	for key := range s.objects {
		if notData(key) {
			delete(s.objects, key)
		}
	}
}

// Unknown reports the objects under the prefix that no ledger entry read
// by this scan names. Files whose names parse to a topic not in topics
// are another configuration's and are left alone.
func (s *Scan) Unknown(topics map[string]bool) []Problem {
	var out []Problem
	for key := range s.objects {
		if s.named[key] {
			continue
		}
		n, ok := s.names.Parse(key)
		switch {
		case !ok:
			out = append(out, Problem{Kind: ProblemUnknownFile, Key: key, Message: fmt.Sprintf(
				"%s is under the prefix, but its name doesn't match file.name_template %q and no ledger entry names it: Spillway didn't write it (or wrote it with another template)", key, s.names.Template)})
		case topics[n.Vars.Topic]:
			out = append(out, Problem{Kind: ProblemUnknownFile, Key: key, Message: fmt.Sprintf(
				"%s is named like a file of %s/%d, but no ledger entry names it: it was written before the ledger existed, copied in, or left by a writer that isn't Spillway; its records are not counted as stored", key, n.Vars.Topic, n.Vars.Partition)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// KeyedObjects is what verify can check of the one-object-per-key layout,
// which keeps no ledger: each object's name must parse with the template.
// It returns the objects and bytes per topic and partition (under the
// empty topic when the template names neither), and the names that don't
// parse, as problems.
func (s *Scan) KeyedObjects() (counts map[string]map[int32][2]int64, unknown []Problem) {
	counts = map[string]map[int32][2]int64{}
	for key, size := range s.objects {
		n, ok := s.names.Parse(key)
		if !ok {
			unknown = append(unknown, Problem{Kind: ProblemUnknownFile, Key: key, Message: fmt.Sprintf(
				"%s is under the prefix, but its name doesn't match file.name_template %q: Spillway didn't write it (or wrote it with another template)", key, s.names.Template)})
			continue
		}
		if counts[n.Vars.Topic] == nil {
			counts[n.Vars.Topic] = map[int32][2]int64{}
		}
		c := counts[n.Vars.Topic][n.Vars.Partition]
		counts[n.Vars.Topic][n.Vars.Partition] = [2]int64{c[0] + 1, c[1] + size}
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].Key < unknown[j].Key })
	return counts, unknown
}

// Size is the size of the object under key, as the listing found it; -1
// when it was not listed.
func (s *Scan) Size(key string) int64 {
	if n, ok := s.objects[key]; ok {
		return n
	}
	return -1
}
