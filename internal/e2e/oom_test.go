package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/spillway/spillway/internal/testkit"
)

const (
	oomTopic      = "big"
	oomPartitions = 1000
	oomBacklog    = 1536 << 20 // value bytes to produce before spillway starts
	oomLimit      = 256 << 20  // the cgroup's hard memory limit
	oomGroup      = "spillway-oom"
)

// TestBoundedMemoryUnderCgroup proves promise 1 (bounded memory) against the
// real failure users hit: a container's memory limit, enforced by the
// kernel. A backlog of 1.5 GiB in 1000 partitions, with records from 100 B
// to 1 MiB, waits in the broker; spillway then drains it inside a 256 MiB
// memory cgroup with memory_limit: auto. It must not be OOM-killed, must
// stop cleanly on SIGTERM, and every record must be in storage exactly once.
//
// The broker runs in its own process, outside the cgroup, so only
// spillway's memory counts against the limit.
//
// The cgroup's peak usage reaches the limit and its failcnt grows in every
// run: both count the page cache of the files spillway writes, which the
// kernel reclaims at the limit. What must not happen is an OOM kill. The
// test has teeth: with SPILLWAY_BACKPRESSURE_MEMORY_LIMIT=2GiB in its
// environment (a budget the cgroup can't hold) spillway is OOM-killed
// within seconds and the test fails.
func TestBoundedMemoryUnderCgroup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("produces and drains a 1.5 GiB backlog; skipped with -short")
	}
	drainUnderCgroup(t, oomCase{format: "jsonl", compression: "zstd", backlog: oomBacklog, read: countStored})
}

// oomCase is one format drained by drainUnderCgroup.
type oomCase struct {
	format, compression string
	backlog             int64 // value bytes to produce
	// spool turns backpressure.spool_dir on, in a directory of the test's,
	// with a disk_limit of twice the backlog. Files then stay open (max_age
	// 1h) until every record is written to one, and the SIGTERM that ends
	// the drain closes them: each can reach max_bytes or its partition's
	// end, whatever the machine's speed.
	spool bool
	// read reads back what spillway stored under root.
	read func(t *testing.T, root string) stored
}

// drainUnderCgroup is TestBoundedMemoryUnderCgroup's test for one format:
// a backlog in 1000 partitions drained inside a 256 MiB memory cgroup,
// without an OOM kill, every record stored exactly once.
func drainUnderCgroup(t *testing.T, oc oomCase) {
	cg := newMemCgroup(t, oomLimit)
	out := filepath.Join(t.TempDir(), "out")
	checkDisk(t, filepath.Dir(out), uint64(oc.backlog)*4)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	maxAge, spoolKeys, stopTimeout := "10s", "", "60s"
	if oc.spool {
		maxAge, stopTimeout = "1h", "10m"
		spoolKeys = fmt.Sprintf("  spool_dir: %q\n  disk_limit: %dMiB\n", filepath.Join(t.TempDir(), "spool"), 2*oc.backlog>>20)
	}
	if v := os.Getenv("SPILLWAY_TEST_OOM_MAX_AGE"); v != "" {
		// To compare the spool with memory alone at the same max_age.
		maxAge = v
	}

	b := startBroker(t, oomPartitions, oomTopic)

	// ---- the backlog, from a producer built without -race
	admin := b.Client(t)
	start := time.Now()
	records, backlog := b.produceBacklog(t, oomTopic, oomPartitions, oc.backlog)
	produceTime := time.Since(start)
	ends := testkit.EndOffsets(t, admin, oomTopic)
	for p := range int32(oomPartitions) {
		want := records / oomPartitions
		if int64(p) < records%oomPartitions {
			want++
		}
		if ends[p] != want {
			t.Fatalf("partition %d: end offset %d after producing, want %d", p, ends[p], want)
		}
	}
	t.Logf("backlog: %d records, %d value bytes (%.2f GiB) in %d partitions, produced in %s (%.0f MiB/s)",
		records, backlog, float64(backlog)/(1<<30), oomPartitions, produceTime.Round(time.Second),
		float64(backlog)/(1<<20)/produceTime.Seconds())

	// ---- drain it under the limit
	sp := startSpillway(t, fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  start_offset: earliest
storage:
  url: "file://%s"
file:
  max_bytes: 64MiB
  max_age: %s
format:
  type: %s
  compression: %s
  value_encoding: base64
backpressure:
  memory_limit: auto
%sadmin:
  listen: "127.0.0.1:0"
log:
  level: info
shutdown:
  timeout: %s
`, b.Addr, oomGroup, oomTopic, out, maxAge, oc.format, oc.compression, spoolKeys, stopTimeout), cg)

	deadline := 15 * time.Minute
	if d, ok := t.Deadline(); ok {
		// Leave time to stop spillway and read the output back.
		deadline = min(deadline, time.Until(d)-3*time.Minute)
	}
	start = time.Now()
	var planLogged bool
	lastLog := start
	for {
		if !planLogged {
			if line := grepLine(sp.LogPath, "memory plan"); line != "" {
				t.Logf("spillway: %s", line)
				planLogged = true
			}
		}
		committed := testkit.CommittedOffsets(t, admin, oomGroup, oomTopic)
		done, complete := drainProgress(committed, ends)
		if complete == len(ends) || oc.spool && recordsWritten(sp) >= records {
			break
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			_, anon := sp.Peaks()
			t.Logf("drain %s: committed %d/%d records, %d/%d partitions complete; spillway RSS %s; cgroup usage %s (anon peak %s), failcnt %d; %s",
				time.Since(start).Round(time.Second), done, records, complete, len(ends),
				mib(sp.RSS()), mib(cg.Usage()), mib(anon), cg.Failcnt(), statusLine(sp))
		}
		select {
		case <-sp.Done():
			st := sp.Wait(t, 0)
			hwm, anon := sp.Peaks()
			t.Fatalf("spillway exited before draining the backlog (%d/%d records committed): %s; OOM kills in its cgroup: %d; cgroup peak %s, anon peak %s, process peak RSS %s, failcnt %d",
				done, records, describeExit(st), cg.OOMKills(), mib(cg.Peak()), mib(anon), mib(hwm), cg.Failcnt())
		case <-time.After(time.Second):
		}
		if time.Since(start) > deadline {
			hwm, anon := sp.Peaks()
			t.Fatalf("backlog not drained after %s: %d/%d records committed (cgroup peak %s, anon peak %s, process peak RSS %s); run with a longer -timeout if the machine is slow",
				deadline.Round(time.Second), done, records, mib(cg.Peak()), mib(anon), mib(hwm))
		}
	}
	drainTime := time.Since(start)
	status := adminStatus(t, sp)
	t.Logf("budget: peak %s of a %s data budget; files closed by reason: %v", mib(status.Peak), mib(status.Limit), status.Closed)

	sp.Signal(t, syscall.SIGTERM)
	st := sp.Wait(t, 11*time.Minute)
	hwm, anon := sp.Peaks()
	t.Logf("drained in %s (%.0f MiB/s of values); %s", drainTime.Round(time.Second),
		float64(backlog)/(1<<20)/drainTime.Seconds(), describeExit(st))
	t.Logf("memory: cgroup limit %s, cgroup peak %s (page cache included), cgroup anon peak %s, spillway peak RSS (VmHWM) %s, failcnt %d, OOM kills %d",
		mib(oomLimit), mib(cg.Peak()), mib(anon), mib(hwm), cg.Failcnt(), cg.OOMKills())
	if n := cg.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d process(es) in spillway's %s cgroup", n, mib(oomLimit))
	}
	if st.ExitCode() != 0 {
		t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
	}
	if _, complete := drainProgress(testkit.CommittedOffsets(t, admin, oomGroup, oomTopic), ends); complete != len(ends) {
		t.Fatalf("after the stop, %d of %d partitions are committed to their end", complete, len(ends))
	}

	// ---- every record exactly once
	start = time.Now()
	got := oc.read(t, out)
	t.Logf("storage: %d files, %d records, %d value bytes, %s compressed on disk; read back in %s",
		got.files, len(got.recs), got.valueBytes, mib(got.fileBytes), time.Since(start).Round(time.Second))
	testkit.AssertExactlyOnce(t, got.recs, oomTopic, ends)
	if got.valueBytes != backlog {
		t.Errorf("stored values hold %d bytes, want the %d produced", got.valueBytes, backlog)
	}
	for _, e := range got.badValues {
		t.Error(e)
	}
	sizes := fileSizes(t, got, ends, 64<<20)
	t.Logf("files: %d, median %s, smallest %s, largest %s; %d (%.0f%%) reached max_bytes or their partition's end, %d were closed before either",
		len(got.sizes), mibf(sizes.median), mibf(sizes.smallest), mibf(sizes.largest), sizes.whole, 100*float64(sizes.whole)/float64(len(got.sizes)), sizes.early)
	if oc.spool && sizes.early*10 > len(got.sizes) {
		t.Errorf("with a spool, %d of %d files were closed before reaching max_bytes or their partition's end; want at most a tenth", sizes.early, len(got.sizes))
	}
}

// fileSizeStats sums up the sizes of the files a drain stored.
type fileSizeStats struct {
	median, smallest, largest int64
	// whole counts files that reached max_bytes (within an eighth: a file
	// closes at the record that takes it there, and a spool estimates the
	// encoded size) or hold their partition's last record; early the rest.
	whole, early int
}

// fileSizes judges the files of s, whose records are those of a backlog
// with end offsets ends.
func fileSizes(t *testing.T, s stored, ends map[int32]int64, maxBytes int64) fileSizeStats {
	t.Helper()
	var st fileSizeStats
	if len(s.sizes) == 0 {
		return st
	}
	last := map[string]bool{}
	for _, r := range s.recs {
		if r.Offset == ends[r.Partition]-1 {
			last[r.File] = true
		}
	}
	sizes := slices.Sorted(maps.Values(s.sizes))
	st.median, st.smallest, st.largest = sizes[len(sizes)/2], sizes[0], sizes[len(sizes)-1]
	for path, n := range s.sizes {
		if last[path] || n >= maxBytes-maxBytes/8 {
			st.whole++
		} else {
			st.early++
		}
	}
	return st
}

func mibf(n int64) string { return fmt.Sprintf("%.2fMiB", float64(n)/(1<<20)) }

// backlogPhrase is the text that fills the second half of record i's value;
// it must match testdata/backlog.
func backlogPhrase(i int) string {
	return fmt.Sprintf("record %d of partition %d: the quick brown fox jumps over the lazy dog. ",
		i, i%oomPartitions)
}

// checkDisk skips the test if dir's file system has less than need bytes
// free, and fails it if dir is a tmpfs: files there are memory charged to
// spillway's cgroup, which would test the wrong thing.
func checkDisk(t *testing.T, dir string, need uint64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	const tmpfsMagic = 0x01021994
	if st.Type == tmpfsMagic {
		t.Fatalf("%s is a tmpfs: spillway's output would be memory charged to its cgroup; set TMPDIR to a directory on disk", dir)
	}
	free := st.Bavail * uint64(st.Bsize)
	t.Logf("disk: %s free in %s", mib(int64(free)), dir)
	if free < need {
		t.Skipf("needs %s free in %s for the output, has %s", mib(int64(need)), dir, mib(int64(free)))
	}
}

func mib(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
}

// grepLine returns the first line of a file that contains s, or "".
func grepLine(path, s string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return sc.Text()
		}
	}
	return ""
}

// stored is what countStored read back.
type stored struct {
	files      int
	fileBytes  int64
	sizes      map[string]int64       // each file's size, by path
	recs       []testkit.StoredRecord // File, Line, Topic, Partition and Offset only
	valueBytes int64                  // decoded value bytes
	badValues  []string               // values that are not the ones produced
}

// countStored reads every output file under root, one at a time, and keeps
// only each record's position and value length, never the values:
// testkit.ReadJSONL would hold the whole 2 GiB of base64 in memory. Every
// record's text half is checked against what was produced, from a few bytes
// of its base64.
//
// Each file is decompressed whole into a reused buffer (a file holds at most
// file.max_bytes): under -race that is several times faster than a
// streaming reader, whose every copy the race detector checks.
func countStored(t *testing.T, root string) stored {
	t.Helper()
	var s stored
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var in, out []byte
	err = testkit.WalkOutput(root, func(path string) error {
		var err error
		topic, partition, _, ok := testkit.ParseDefaultName(path)
		if !ok || !strings.HasSuffix(path, ".jsonl.zst") {
			return fmt.Errorf("%s: not a {{topic}}-{{partition}}-{{start_offset}}.jsonl.zst file", path)
		}
		if in, err = readFileInto(in, path); err != nil {
			return err
		}
		s.addFile(path, int64(len(in)))
		if out, err = dec.DecodeAll(in, out[:0]); err != nil {
			return fmt.Errorf("%s: zstd: %w", path, err)
		}
		return s.readLines(out, path, topic, partition)
	})
	if err != nil {
		t.Fatalf("reading spillway's output: %v", err)
	}
	return s
}

// addFile counts a file of n bytes read back.
func (s *stored) addFile(path string, n int64) {
	s.files++
	s.fileBytes += n
	if s.sizes == nil {
		s.sizes = map[string]int64{}
	}
	s.sizes[path] = n
}

// readFileInto reads a whole file into buf's storage.
func readFileInto(buf []byte, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf = slices.Grow(buf[:0], int(st.Size()))[:st.Size()]
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return buf, nil
}

// readLines reads one decompressed jsonl file.
func (s *stored) readLines(data []byte, path, topic string, partition int32) error {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return fmt.Errorf("%s: the last line has no line break: the file is cut short", path)
	}
	for lineNo := 1; len(data) > 0; lineNo++ {
		i := bytes.IndexByte(data, '\n')
		line := data[:i]
		data = data[i+1:]
		offset, key, value, err := parseLine(line)
		if err != nil {
			return fmt.Errorf("%s: line %d: %w", path, lineNo, err)
		}
		n, err := decodedLen(value)
		if err != nil {
			return fmt.Errorf("%s: line %d: value: %w", path, lineNo, err)
		}
		s.valueBytes += int64(n)
		s.recs = append(s.recs, testkit.StoredRecord{File: path, Line: lineNo, Topic: topic, Partition: partition, Offset: offset})
		if msg := checkRecord(partition, offset, key, value, n); msg != "" && len(s.badValues) < 10 {
			s.badValues = append(s.badValues, fmt.Sprintf("%s: line %d: %s", path, lineNo, msg))
		}
	}
	return nil
}

var (
	keyPrefix   = []byte(`{"key":"`)
	valuePrefix = []byte(`","value":"`)
	offsetField = []byte(`","offset":`)
)

// parseLine returns a jsonl line's offset and its base64 key and value.
// Lines in the default field order (key, value, offset, ...) take a fast
// path that never scans the value byte by byte in Go (which -race makes
// slow); any other line is decoded as JSON. Inside a JSON string every '"'
// is escaped, so the first `","value":"` after the key is the field.
func parseLine(line []byte) (offset int64, key, value []byte, err error) {
	if bytes.HasPrefix(line, keyPrefix) {
		head := line[:min(len(line), 512)]
		if i := bytes.Index(head, valuePrefix); i > 0 {
			key = line[len(keyPrefix):i]
			rest := line[i+len(valuePrefix):]
			if j := bytes.IndexByte(rest, '"'); j >= 0 && bytes.HasPrefix(rest[j:], offsetField) {
				digits := rest[j+len(offsetField):]
				k := 0
				for k < len(digits) && digits[k] >= '0' && digits[k] <= '9' {
					k++
				}
				if k < len(digits) && (digits[k] == ',' || digits[k] == '}') {
					if off, err := strconv.ParseInt(string(digits[:k]), 10, 64); err == nil {
						return off, key, rest[:j], nil
					}
				}
			}
		}
	}
	var l struct {
		Offset *int64  `json:"offset"`
		Key    *string `json:"key"`
		Value  *string `json:"value"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %.200q", err, line)
	}
	if l.Offset == nil || l.Key == nil || l.Value == nil {
		return 0, nil, nil, fmt.Errorf("no \"offset\", or no string \"key\" or \"value\": %.200q", line)
	}
	return *l.Offset, []byte(*l.Key), []byte(*l.Value), nil
}

// decodedLen is the length of standard, padded base64 once decoded.
func decodedLen(b64 []byte) (int, error) {
	if len(b64)%4 != 0 {
		return 0, fmt.Errorf("%d base64 characters, not a multiple of 4", len(b64))
	}
	n := len(b64) / 4 * 3
	if bytes.HasSuffix(b64, []byte("==")) {
		n -= 2
	} else if bytes.HasSuffix(b64, []byte("=")) {
		n--
	}
	return n, nil
}

// checkRecord checks a stored record's base64 key, and the start of its
// value's text half, against the record produced at that partition and
// offset (record i went to partition i%1000 at offset i/1000). It decodes
// only the base64 around the half, not the whole value. n is the value's
// decoded length. It returns "" when they match.
func checkRecord(partition int32, offset int64, key, value []byte, n int) string {
	i := int(offset)*oomPartitions + int(partition)
	if k, err := base64.StdEncoding.DecodeString(string(key)); err != nil || string(k) != fmt.Sprintf("big-%d", i) {
		return fmt.Sprintf("partition %d offset %d: key %q (decoded %q, %v), want base64 of \"big-%d\"", partition, offset, key, k, err, i)
	}
	half := n / 2
	from := half / 3 * 4 // the base64 quantum holding decoded byte half
	chunk := value[from:min(len(value), from+128)]
	text, err := base64.StdEncoding.DecodeString(string(chunk))
	if err != nil {
		return fmt.Sprintf("partition %d offset %d: value is not base64: %v", partition, offset, err)
	}
	text = text[half%3:]
	want := backlogPhrase(i)
	if k := min(len(text), len(want)); string(text[:k]) != want[:k] {
		return fmt.Sprintf("partition %d offset %d: value's text half starts %.60q, want %.60q", partition, offset, text, want)
	}
	return ""
}

// recordsWritten is /status's count of records written to files, or -1.
func recordsWritten(sp *spillwayProc) int64 {
	line := grepLine(sp.LogPath, "admin endpoint serving")
	_, addr, ok := strings.Cut(line, "addr=")
	if !ok {
		return -1
	}
	addr, _, _ = strings.Cut(addr, " ")
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Written int64 `json:"records_written"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return -1
	}
	return st.Written
}

// statusLine sums up spillway's /status for the progress log: what the
// budget holds and for whom, open files, why files closed, and whether
// fetching is paused.
func statusLine(sp *spillwayProc) string {
	line := grepLine(sp.LogPath, "admin endpoint serving")
	_, addr, ok := strings.Cut(line, "addr=")
	if !ok {
		return "no /status"
	}
	addr, _, _ = strings.Cut(addr, " ")
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		return fmt.Sprintf("/status: %v", err)
	}
	defer resp.Body.Close()
	var st struct {
		Used    int64            `json:"budget_used_bytes"`
		Held    map[string]int64 `json:"budget_held_bytes"`
		Paused  bool             `json:"fetch_paused"`
		Open    int              `json:"open_files"`
		Closed  map[string]int64 `json:"files_closed"`
		Written int64            `json:"records_written"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return fmt.Sprintf("/status: %v", err)
	}
	var held []string
	for _, h := range slices.Sorted(maps.Keys(st.Held)) {
		held = append(held, fmt.Sprintf("%s %s", h, mib(st.Held[h])))
	}
	return fmt.Sprintf("budget %s (%s); fetch paused %v; %d files open; closed %v", mib(st.Used), strings.Join(held, ", "), st.Paused, st.Open, st.Closed)
}
