package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/testkit"
)

const (
	bigTopic = "huge"
	bigGroup = "spillway-huge"
	// bigMemoryLimit is spillway's backpressure.memory_limit, and
	// bigCgroup the kernel's hard limit around it: the bound the README
	// documents for records larger than the budget's room that don't
	// follow each other, memory_limit plus the largest record (see
	// "Memory model").
	bigMemoryLimit = 64 << 20
	bigLargest     = 40 << 20
	bigCgroup      = bigMemoryLimit + bigLargest
)

// bigRecord is one record the test produces, and how to check it once
// stored.
type bigRecord struct {
	partition int32
	value     []byte
	json      bool // the value is JSON, stored embedded (compacted)
}

// bigRecords are a 20 MiB pretty-printed JSON value and a 40 MiB text value
// full of characters JSON must escape, both larger than the whole data
// budget of a 64 MiB limit, each written in its own format path (compacted
// JSON, escaped string). A small record comes between them, as the bound
// for such records apart from each other asks; small records flow in
// another partition meanwhile.
func bigRecords() []bigRecord {
	var recs []bigRecord
	for i := range 5 {
		recs = append(recs, bigRecord{partition: 1, value: fmt.Appendf(nil, `{"n":%d}`, i), json: true})
	}
	return append(recs,
		bigRecord{partition: 0, value: []byte(`{"n":0}`), json: true},
		bigRecord{partition: 0, value: prettyJSON(20 << 20), json: true},
		bigRecord{partition: 0, value: []byte(`{"n":2}`), json: true},
		bigRecord{partition: 0, value: escapedText(bigLargest, 'a')},
		bigRecord{partition: 0, value: []byte(`{"n":4}`), json: true},
	)
}

// prettyJSON is an indented JSON document of about n bytes: its line breaks
// must be taken out for JSON Lines.
func prettyJSON(n int) []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"items\": [\n")
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    {\"i\": %d, \"s\": \"item %d \\\"quoted\\\" \\u00e9\"}", i, i)
	}
	b.WriteString("\n  ]\n}\n")
	return b.Bytes()
}

// escapedText is about n bytes of text that is not JSON, with quotes,
// backslashes, tabs, line breaks and non-ASCII letters.
func escapedText(n int, tag byte) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%c line %d: \"quoted\" back\\slash\ttab café\n", tag, i)
	}
	return b.Bytes()
}

// TestOversizedRecordsUnderCgroup writes records larger than the whole data
// budget (20 and 40 MiB against memory_limit: 64MiB) inside a memory cgroup
// of the bound the README documents for them, with no compression, so that
// every byte goes through the part queue. Spillway must not be OOM-killed,
// must store every record exactly once and intact, must warn once for the
// partition, naming the record and the setting to raise, and its budget
// must stay within its limit, the large records held apart.
func TestOversizedRecordsUnderCgroup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("produces and stores 60 MiB records under a memory cgroup; skipped with -short")
	}
	cg := newMemCgroup(t, bigCgroup)
	out := filepath.Join(t.TempDir(), "out")
	checkDisk(t, filepath.Dir(out), 1<<30)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	b := startBroker(t, 1)
	admin := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	maxBytes := fmt.Sprint(64 << 20)
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, 2, 1, map[string]*string{"max.message.bytes": &maxBytes}, bigTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", bigTopic, err)
	}
	recs := bigRecords()
	prod := b.Client(t, kgo.ProducerBatchMaxBytes(64<<20), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedBytes(256<<20))
	offsets := map[int32][]bigRecord{}
	for _, r := range recs {
		// One at a time, so each is a batch of its own.
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: bigTopic, Partition: r.partition, Value: r.value}).FirstErr(); err != nil {
			t.Fatalf("producing a %s record to partition %d: %v", mib(int64(len(r.value))), r.partition, err)
		}
		offsets[r.partition] = append(offsets[r.partition], r)
	}
	ends := testkit.EndOffsets(t, admin, bigTopic)

	sp := startSpillway(t, fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  start_offset: earliest
storage:
  url: "file://%s"
file:
  max_age: 10s
format:
  type: jsonl
  compression: none
backpressure:
  memory_limit: %d
admin:
  listen: "127.0.0.1:0"
log:
  level: info
shutdown:
  timeout: 60s
`, b.Addr, bigGroup, bigTopic, out, bigMemoryLimit), cg)

	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, complete := drainProgress(testkit.CommittedOffsets(t, admin, bigGroup, bigTopic), ends)
		if complete == len(ends) {
			break
		}
		select {
		case <-sp.Done():
			st := sp.Wait(t, 0)
			hwm, anon := sp.Peaks()
			t.Fatalf("spillway exited before storing every record: %s; OOM kills in its %s cgroup: %d; cgroup anon peak %s, process peak RSS %s",
				describeExit(st), mib(bigCgroup), cg.OOMKills(), mib(anon), mib(hwm))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("records not all committed after 5m: committed %v, want %v", testkit.CommittedOffsets(t, admin, bigGroup, bigTopic), ends)
		}
	}
	status := adminStatus(t, sp)
	sp.Signal(t, syscall.SIGTERM)
	st := sp.Wait(t, 90*time.Second)
	hwm, anon := sp.Peaks()
	t.Logf("memory: memory_limit %s, cgroup limit %s, cgroup peak %s (page cache included), cgroup anon peak %s, spillway peak RSS (VmHWM, the binary's pages included) %s, OOM kills %d; %s",
		mib(bigMemoryLimit), mib(bigCgroup), mib(cg.Peak()), mib(anon), mib(hwm), cg.OOMKills(), describeExit(st))
	t.Logf("budget: limit %s, peak %s; held apart at most %s", mib(status.Limit), mib(status.Peak), mib(status.UnreservedPeak))
	if n := cg.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d process(es) in spillway's %s cgroup", n, mib(bigCgroup))
	}
	if st.ExitCode() != 0 {
		t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
	}
	// The large records are held apart, over the limit; the rest of the
	// budget stays within it: they went to storage piece by piece.
	if status.Peak > status.Limit+2<<20 {
		t.Errorf("budget peak %s over its limit %s", mib(status.Peak), mib(status.Limit))
	}
	if status.UnreservedPeak < bigLargest-bigMemoryLimit/8 {
		t.Errorf("held apart at most %s, want the 40 MiB record less the fetch share", mib(status.UnreservedPeak))
	}

	// Read back outside the race detector (tens of MiB of JSON took
	// minutes under it), comparing each value by its digest.
	stored := readStoredOffsets(t, out)
	testkit.AssertExactlyOnce(t, stored, bigTopic, ends)
	for _, s := range stored {
		if s.Offset < 0 || s.Offset >= int64(len(offsets[s.Partition])) {
			continue // reported by AssertExactlyOnce
		}
		if msg := checkBigValue(offsets[s.Partition][s.Offset], s.ValueDigest); msg != "" {
			t.Errorf("partition %d offset %d: %s", s.Partition, s.Offset, msg)
		}
	}

	// One warning, for the partition's first large record.
	logText, err := os.ReadFile(sp.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	for line := range strings.Lines(string(logText)) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "backpressure.memory_limit") {
			warnings = append(warnings, strings.TrimSpace(line))
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], fmt.Sprintf("topic=%s partition=0 offset=1 record_bytes=", bigTopic)) {
		t.Errorf("warnings naming backpressure.memory_limit:\n%s\nwant one, for partition 0 offset 1", strings.Join(warnings, "\n"))
	}
	for _, w := range warnings {
		t.Logf("spillway: %s", w)
	}
}

// budgetStatus is the part of /status this test reads.
type budgetStatus struct {
	Limit          int64            `json:"budget_limit_bytes"`
	Closed         map[string]int64 `json:"files_closed"`
	Peak           int64            `json:"budget_peak_bytes"`
	UnreservedPeak int64            `json:"budget_unreserved_peak_bytes"`
}

// adminStatus reads spillway's /status, at the address its log names.
func adminStatus(t *testing.T, sp *spillwayProc) budgetStatus {
	t.Helper()
	line := grepLine(sp.LogPath, "admin endpoint serving")
	_, addr, ok := strings.Cut(line, "addr=")
	if !ok {
		t.Fatalf("spillway logged no admin address: %q", line)
	}
	addr, _, _ = strings.Cut(addr, " ")
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	defer resp.Body.Close()
	var st budgetStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	return st
}

// checkBigValue compares a stored value's digest with the one produced: JSON is
// stored embedded on one line, text as a JSON string.
func checkBigValue(r bigRecord, stored string) string {
	if r.json {
		if want := testkit.JSONDigest(r.value); stored != want {
			return fmt.Sprintf("stored value %s is not the %s of JSON produced, compacted (%s)", stored, mib(int64(len(r.value))), want)
		}
		return ""
	}
	if want := testkit.TextDigest(r.value); stored != want {
		return fmt.Sprintf("stored value %s is not the %s of text produced (%s)", stored, mib(int64(len(r.value))), want)
	}
	return ""
}

// Records larger than the budget in every format (issue #22, case 7):
// four values of fmtRecord bytes in a row in one partition, at
// backpressure.memory_limit fmtMemoryLimit. The cgroup around spillway is
// the bound docs/memory.md states for records that follow each other, and
// that spillway's warning advises: memory_limit plus the format's multiple
// of the largest record (budget.Plan.LargeRecordMultiple), plus fmtOverhead
// for the binary's own pages.
const (
	fmtTopic       = "huge-formats"
	fmtRecords     = 4
	fmtRecord      = 30 << 20
	fmtMemoryLimit = 128 << 20
	fmtOverhead    = 16 << 20
)

// TestOversizedRecordsEveryFormatUnderCgroup writes four 30 MiB values that
// follow each other in every format, each with a codec, at memory_limit:
// 128MiB, inside a cgroup of memory_limit + the format's multiple × 30 MiB
// + fmtOverhead. Spillway must not be OOM-killed, must store all four,
// counted by reading the files back (spillway verify --deep, and the bytes
// format's separators), and its warning must advise that same multiple.
// Before the multiple was the format's, the advice was memory_limit plus
// the largest record (plus twice when they follow each other, in
// docs/memory.md), and parquet was OOM-killed in that cgroup.
func TestOversizedRecordsEveryFormatUnderCgroup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("produces 120 MiB and writes it in 6 formats under memory cgroups; skipped with -short")
	}
	// To measure the peaks without the limit: a cgroup of this many MiB.
	var fixedCgroup int64
	if v := os.Getenv("SPILLWAY_TEST_BIGREC_CGROUP_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("SPILLWAY_TEST_BIGREC_CGROUP_MIB=%q: want a size in MiB", v)
		}
		fixedCgroup = n << 20
	}
	// Probe once, so that a machine without a writable memory cgroup skips
	// (or fails, under SPILLWAY_TEST_REQUIRE_TOOLS=1) before the broker
	// starts.
	newMemCgroup(t, fmtMemoryLimit)

	b := startBroker(t, 1)
	admin := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	maxBytes := fmt.Sprint(64 << 20)
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &maxBytes}, fmtTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", fmtTopic, err)
	}
	prod := b.Client(t, kgo.ProducerBatchMaxBytes(64<<20), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedBytes(256<<20))
	for i := range fmtRecords {
		// Letters and no separator: text in every format, a line of its
		// own in bytes; compressible, as values mostly are.
		unit := fmt.Sprintf("value %d, some text of a large record. ", i)
		v := bytes.Repeat([]byte(unit), fmtRecord/len(unit)+1)[:fmtRecord]
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: fmtTopic, Key: fmt.Appendf(nil, "k%d", i), Value: v}).FirstErr(); err != nil {
			t.Fatalf("producing record %d: %v", i, err)
		}
	}
	ends := testkit.EndOffsets(t, admin, fmtTopic)
	if ends[0] != fmtRecords {
		t.Fatalf("end offsets %v after producing, want %d records in partition 0", ends, fmtRecords)
	}

	// One codec each, to keep the test under a minute; avro and parquet
	// with none copy no more (see format.LargeRecordCopies).
	for _, c := range []struct{ typ, compression string }{
		{"parquet", "zstd"}, {"avro", "zstd"},
		{"jsonl", "zstd"}, {"json", "gzip"}, {"csv", "snappy"}, {"bytes", "none"},
	} {
		t.Run(c.typ+"-"+c.compression, func(t *testing.T) {
			plan, err := budget.NewPlan(fmtMemoryLimit)
			if err != nil {
				t.Fatal(err)
			}
			plan.RecordCopies = formats.Of(c.typ).LargeRecordCopies(config.Format{Type: c.typ, Compression: c.compression})
			multiple := plan.LargeRecordMultiple()
			cgroupLimit := fmtMemoryLimit + multiple*fmtRecord + fmtOverhead
			if fixedCgroup > 0 {
				cgroupLimit = fixedCgroup
			}
			cg := newMemCgroup(t, cgroupLimit)
			out := filepath.Join(t.TempDir(), "out")
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			group := "spillway-" + c.typ + "-" + c.compression
			cfg := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  start_offset: earliest
storage:
  url: "file://%s"
file:
  max_age: 1h
  max_records: %d
format:
  type: %s
  compression: %s
  fields: [key, value, offset]
backpressure:
  memory_limit: %d
admin:
  listen: "127.0.0.1:0"
shutdown:
  timeout: 60s
`, b.Addr, group, fmtTopic, out, fmtRecords/2, c.typ, c.compression, fmtMemoryLimit)
			if c.typ == "bytes" {
				cfg = strings.Replace(cfg, "  fields: [key, value, offset]\n", "", 1)
			}
			sp := startSpillway(t, cfg, cg)
			deadline := time.Now().Add(3 * time.Minute)
			for testkit.CommittedOffsets(t, admin, group, fmtTopic)[0] != fmtRecords {
				select {
				case <-sp.Done():
					st := sp.Wait(t, 0)
					hwm, anon := sp.Peaks()
					t.Fatalf("spillway exited before storing the %d records: %s; OOM kills in its %s cgroup: %d; cgroup anon peak %s, process peak RSS %s",
						fmtRecords, describeExit(st), mib(cgroupLimit), cg.OOMKills(), mib(anon), mib(hwm))
				case <-time.After(100 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("not all committed after 3m: committed %v, want %d", testkit.CommittedOffsets(t, admin, group, fmtTopic), fmtRecords)
				}
			}
			sp.Signal(t, syscall.SIGTERM)
			st := sp.Wait(t, 90*time.Second)
			hwm, anon := sp.Peaks()
			t.Logf("%s/%s: memory_limit %s, cgroup limit %s (%d× the record over memory_limit): cgroup anon peak %s (%.2f× the record over memory_limit), spillway peak RSS %s, OOM kills %d; %s",
				c.typ, c.compression, mib(fmtMemoryLimit), mib(cgroupLimit), multiple, mib(anon),
				float64(anon-fmtMemoryLimit)/fmtRecord, mib(hwm), cg.OOMKills(), describeExit(st))
			if n := cg.OOMKills(); n != 0 {
				t.Fatalf("the kernel OOM-killed %d process(es) in spillway's %s cgroup", n, mib(cgroupLimit))
			}
			if st.ExitCode() != 0 {
				t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
			}
			if got := countStoredFormat(t, c.typ, cfg, out); got != fmtRecords {
				t.Errorf("%d records stored, want %d", got, fmtRecords)
			}
			advice := fmt.Sprintf("memory_limit plus %d times the largest record", multiple)
			if line := grepLine(sp.LogPath, "record larger than the memory budget"); !strings.Contains(line, advice) {
				t.Errorf("spillway's warning %q does not advise %q", line, advice)
			}
		})
	}
}

// countStoredFormat counts the records spillway stored under out: by
// spillway verify --deep, which reads every file back, and for bytes,
// which verify does not read, by the separators in the files.
func countStoredFormat(t *testing.T, typ, cfg, out string) int64 {
	t.Helper()
	if typ == "bytes" {
		var n int64
		err := testkit.WalkOutput(out, func(path string) error {
			b, err := os.ReadFile(path)
			n += int64(bytes.Count(b, []byte("\n")))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	bins := binariesFor(t)
	cfgPath := filepath.Join(t.TempDir(), "verify.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.spillway, "verify", "--config", cfgPath, "--json", "--deep")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var rep struct {
		OK         bool `json:"ok"`
		Partitions []struct {
			Deep *struct {
				Records    int64 `json:"records_read"`
				NotChecked []any `json:"not_checked"`
			} `json:"deep"`
		} `json:"partitions"`
	}
	if jerr := json.Unmarshal(stdout, &rep); jerr != nil || !rep.OK {
		t.Fatalf("spillway verify --deep: %v, ok=%v\n%s\n%s", err, rep.OK, stdout, stderr.String())
	}
	var n int64
	for _, p := range rep.Partitions {
		if p.Deep == nil || len(p.Deep.NotChecked) > 0 {
			t.Fatalf("spillway verify --deep did not read every file back:\n%s", stdout)
		}
		n += p.Deep.Records
	}
	return n
}
