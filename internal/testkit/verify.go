package testkit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// StoredRecord is one record read back from Spillway's output.
type StoredRecord struct {
	File      string // path of the file that holds it
	Line      int    // 1-based line number in the decompressed file
	Topic     string // from the file name
	Partition int32  // from the file name
	Offset    int64
	Key       json.RawMessage // as written: a JSON string, null, ...
	Value     json.RawMessage // as written: an object, a string, null, ...
	Headers   []map[string]any
	Timestamp int64 // milliseconds since the epoch
	// ValueDigest is the value's ValueDigest, set by ReadStoredOffsets
	// only (which leaves Value nil).
	ValueDigest string
}

// defaultNameRE matches the default template {{topic}}-{{partition}}-{{start_offset}}
// followed by extensions. Topic is greedy, so a topic holding '-' is parsed
// from the right; extensions start with a letter, so they never eat digits.
var defaultNameRE = regexp.MustCompile(`^(.+)-([0-9]+)-([0-9]+)((?:\.[A-Za-z][A-Za-z0-9]*)*)$`)

// ParseDefaultName parses a file name made by the default template
// "{{topic}}-{{partition}}-{{start_offset}}" plus extensions such as ".jsonl",
// ".jsonl.gz" or ".jsonl.zst". The topic may contain '-' and '.'. name may be
// a path: only its base name is parsed.
func ParseDefaultName(name string) (topic string, partition int32, startOffset int64, ok bool) {
	m := defaultNameRE.FindStringSubmatch(filepath.Base(name))
	if m == nil {
		return "", 0, 0, false
	}
	p, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", 0, 0, false
	}
	off, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return "", 0, 0, false
	}
	return m[1], int32(p), off, true
}

// ReadJSONL reads every file under root written in the jsonl format with the
// default file name template, and returns their records in walk order (files
// by name, lines in file order). Names starting with "." (files and folders)
// are skipped. Files are decompressed by their last extension: .gz (gzip),
// .zst (zstd), .snappy (snappy framed), anything else is read as is.
//
// Each line must be a JSON object with at least "offset"; "key", "value",
// "timestamp" and "headers" ([{"key":..,"value":..}]) are read when present.
// A file whose name does not parse, a file that does not decompress and a line
// that is not such an object fail the test.
func ReadJSONL(t testing.TB, root string) []StoredRecord {
	t.Helper()
	out, err := ReadJSONLDir(root)
	if err != nil {
		t.Fatalf("testkit.ReadJSONL(%s): %v", root, err)
	}
	return out
}

// ReadJSONLDir is ReadJSONL for a program: it returns the first problem
// instead of failing a test. (internal/e2e reads large outputs with it in
// a program built without -race, where decoding is many times faster.)
func ReadJSONLDir(root string) ([]StoredRecord, error) {
	var out []StoredRecord
	err := WalkOutput(root, func(path string) error {
		recs, err := readJSONLFile(path)
		if err != nil {
			return err
		}
		out = append(out, recs...)
		return nil
	})
	return out, err
}

// WalkOutput calls fn with the path of every file under root, in lexical
// order, as ReadJSONL reads them: names starting with "." (files and
// folders, but not root itself) are skipped. It stops at the first error,
// of the walk or of fn, and returns it.
func WalkOutput(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Dot-files are temp files; "_" folders are Spillway's own state
		// (the ledger), which query engines skip the same way.
		if path != root && (strings.HasPrefix(d.Name(), ".") || d.IsDir() && strings.HasPrefix(d.Name(), "_")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		return fn(path)
	})
}

// jsonlLine is the shape of one line of the jsonl format.
type jsonlLine struct {
	Key       json.RawMessage  `json:"key"`
	Value     json.RawMessage  `json:"value"`
	Offset    *int64           `json:"offset"`
	Timestamp int64            `json:"timestamp"`
	Headers   []map[string]any `json:"headers"`
}

func readJSONLFile(path string) (recs []StoredRecord, err error) {
	topic, partition, _, ok := ParseDefaultName(path)
	if !ok {
		return nil, fmt.Errorf("%s: name does not match {{topic}}-{{partition}}-{{start_offset}}[.ext...]", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	var r io.Reader = f
	switch filepath.Ext(path) {
	case ".gz":
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
		defer zr.Close()
		r = zr
	case ".zst":
		zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%s: zstd: %w", path, err)
		}
		defer zr.Close()
		r = zr
	case ".snappy":
		r = snappy.NewReader(f)
	}

	br := bufio.NewReaderSize(r, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, fmt.Errorf("%s: line %d: read: %w", path, lineNo, rerr)
		}
		if rerr == io.EOF && len(line) == 0 {
			break
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			return nil, fmt.Errorf("%s: line %d is empty", path, lineNo)
		}
		var l jsonlLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w: %.200q", path, lineNo, err, line)
		}
		if l.Offset == nil {
			return nil, fmt.Errorf("%s: line %d has no \"offset\": %.200q", path, lineNo, line)
		}
		recs = append(recs, StoredRecord{
			File:      path,
			Line:      lineNo,
			Topic:     topic,
			Partition: partition,
			Offset:    *l.Offset,
			Key:       l.Key,
			Value:     l.Value,
			Headers:   l.Headers,
			Timestamp: l.Timestamp,
		})
		if rerr == io.EOF {
			break
		}
	}
	return recs, nil
}

// AssertExactlyOnce checks that recs hold, for each partition p of topic in
// want, every offset 0..want[p]-1 exactly once, and nothing else for topic.
// Records of other topics are ignored. On failure it reports, per partition,
// the first few missing, duplicated and unexpected offsets, and the totals.
func AssertExactlyOnce(t testing.TB, recs []StoredRecord, topic string, want map[int32]int64) {
	t.Helper()
	ranges := make(map[int32][2]int64, len(want))
	for p, end := range want {
		ranges[p] = [2]int64{0, end}
	}
	assertExactlyOnce(t, recs, topic, ranges)
}

// AssertExactlyOnceRanges is AssertExactlyOnce with a range [start, end) of
// offsets per partition, for topics whose start was deleted or whose records
// were only partly consumed.
func AssertExactlyOnceRanges(t testing.TB, recs []StoredRecord, topic string, want map[int32][2]int64) {
	t.Helper()
	assertExactlyOnce(t, recs, topic, want)
}

// maxListed is how many offsets of each kind a failure message lists per
// partition.
const maxListed = 5

// partState tallies one partition's stored offsets against the range
// wanted.
type partState struct {
	start, end int64
	counts     []uint16 // counts[o-start], saturating
	unexpected []int64  // offsets outside [start, end), first few
	nUnexp     int
}

// tally counts how often each wanted offset of topic is stored, per
// partition, and the records of partitions not wanted.
func tally(t testing.TB, recs []StoredRecord, topic string, want map[int32][2]int64) (parts map[int32]*partState, unknown map[int32]int, got int) {
	t.Helper()
	parts = make(map[int32]*partState, len(want))
	for p, r := range want {
		if r[1] < r[0] {
			t.Fatalf("testkit.AssertExactlyOnce: partition %d: bad range [%d, %d)", p, r[0], r[1])
		}
		parts[p] = &partState{start: r[0], end: r[1], counts: make([]uint16, r[1]-r[0])}
	}
	unknown = map[int32]int{} // partition -> records
	for _, r := range recs {
		if r.Topic != topic {
			continue
		}
		got++
		ps, ok := parts[r.Partition]
		if !ok {
			unknown[r.Partition]++
			continue
		}
		if r.Offset < ps.start || r.Offset >= ps.end {
			ps.nUnexp++
			if len(ps.unexpected) < maxListed {
				ps.unexpected = append(ps.unexpected, r.Offset)
			}
			continue
		}
		if c := &ps.counts[r.Offset-ps.start]; *c < ^uint16(0) {
			*c++
		}
	}
	return parts, unknown, got
}

// report describes what is wrong with partition p ("" when nothing is),
// and returns its counts and the duplicates it lists.
func (ps *partState) report(p int32) (msg string, nMissing, nDup int, listedDups []int64) {
	var missing, dups []string
	for i, c := range ps.counts {
		off := ps.start + int64(i)
		switch {
		case c == 0:
			nMissing++
			if len(missing) < maxListed {
				missing = append(missing, strconv.FormatInt(off, 10))
			}
		case c > 1:
			nDup++
			if len(dups) < maxListed {
				dups = append(dups, fmt.Sprintf("%d(x%d)", off, c))
				listedDups = append(listedDups, off)
			}
		}
	}
	if nMissing == 0 && nDup == 0 && ps.nUnexp == 0 {
		return "", 0, 0, nil
	}
	msg = fmt.Sprintf("partition %d [%d, %d):", p, ps.start, ps.end)
	if nMissing > 0 {
		msg += fmt.Sprintf(" %d missing (first: %s);", nMissing, strings.Join(missing, ", "))
	}
	if nDup > 0 {
		msg += fmt.Sprintf(" %d duplicated (first: %s);", nDup, strings.Join(dups, ", "))
	}
	if ps.nUnexp > 0 {
		msg += fmt.Sprintf(" %d records out of range (first offsets: %v);", ps.nUnexp, ps.unexpected)
	}
	return msg, nMissing, nDup, listedDups
}

func assertExactlyOnce(t testing.TB, recs []StoredRecord, topic string, want map[int32][2]int64) {
	t.Helper()
	parts, unknown, got := tally(t, recs, topic, want)
	var (
		msgs                        []string
		wantTotal                   int64
		totMissing, totDup, totUnex int64
		dupOffsets                  = map[int32]map[int64]bool{} // listed duplicates, to locate them
	)
	sortedParts := make([]int32, 0, len(parts))
	for p := range parts {
		sortedParts = append(sortedParts, p)
	}
	sort.Slice(sortedParts, func(i, j int) bool { return sortedParts[i] < sortedParts[j] })
	for _, p := range sortedParts {
		ps := parts[p]
		wantTotal += ps.end - ps.start
		m, nMissing, nDup, listed := ps.report(p)
		for _, off := range listed {
			if dupOffsets[p] == nil {
				dupOffsets[p] = map[int64]bool{}
			}
			dupOffsets[p][off] = true
		}
		totMissing += int64(nMissing)
		totDup += int64(nDup)
		totUnex += int64(ps.nUnexp)
		if m != "" {
			msgs = append(msgs, m)
		}
	}
	for p, n := range unknown {
		msgs = append(msgs, fmt.Sprintf("partition %d: %d records, but this partition was not expected", p, n))
	}
	if len(msgs) == 0 {
		return
	}
	sort.Strings(msgs[len(msgs)-len(unknown):])

	sum := fmt.Sprintf("topic %q: got %d records, want %d; %d missing, %d duplicated offsets, %d out of range, %d unexpected partitions",
		topic, got, wantTotal, totMissing, totDup, totUnex, len(unknown))
	text := "testkit.AssertExactlyOnce: " + sum + "\n  " + strings.Join(msgs, "\n  ")
	if where := duplicateSites(recs, topic, dupOffsets); len(where) > 0 {
		text += "\n duplicates found at:\n" + strings.Join(where, "\n")
	}
	t.Errorf("%s", text)
}

// duplicateSites says where the listed duplicates are, which tells a
// rewritten file from a retried upload.
func duplicateSites(recs []StoredRecord, topic string, dupOffsets map[int32]map[int64]bool) []string {
	var where []string
	for _, r := range recs {
		if r.Topic == topic && dupOffsets[r.Partition][r.Offset] && len(where) < 3*maxListed {
			where = append(where, fmt.Sprintf("  p%d offset %d at %s:%d", r.Partition, r.Offset, r.File, r.Line))
		}
	}
	return where
}

// AssertStoredExcept checks that every offset of topic's partition below
// end is stored exactly once, except those in [gap[0], gap[1]), which must
// not be stored at all: what a run that passed a gap (retention, an
// operator's skip) leaves.
func AssertStoredExcept(t testing.TB, recs []StoredRecord, topic string, partition int32, end int64, gap [2]int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, r := range recs {
		if r.Topic == topic && r.Partition == partition {
			seen[r.Offset]++
		}
	}
	for o := range end {
		want := 1
		if o >= gap[0] && o < gap[1] {
			want = 0
		}
		if seen[o] != want {
			t.Fatalf("testkit.AssertStoredExcept: %s/%d offset %d is stored %d times, want %d", topic, partition, o, seen[o], want)
		}
	}
}
