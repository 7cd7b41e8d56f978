package testkit

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recordingTB is the one mock in this package: a testing.TB that records
// failures instead of failing. It lets a test check that an assertion does
// fail on bad input, which a real *testing.T cannot do: a failing *testing.T
// would fail this test itself. Other methods (Helper, Logf, Cleanup, ...) go
// to the real test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errs   []string
	failed bool
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, s)
	r.failed = true
}

func (r *recordingTB) Error(args ...any)                 { r.add(fmt.Sprint(args...)) }
func (r *recordingTB) Errorf(format string, args ...any) { r.add(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Fail()                             { r.add("Fail called") }
func (r *recordingTB) FailNow()                          { r.add("FailNow called"); runtime.Goexit() }
func (r *recordingTB) Fatal(args ...any)                 { r.add(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.add(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recordingTB) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// capture runs fn with a recordingTB in its own goroutine, as the testing
// package runs a test, so that Fatal's Goexit ends fn and not the caller.
func capture(t *testing.T, fn func(tb testing.TB)) *recordingTB {
	r := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func TestClusterProduceEndOffsets(t *testing.T) {
	c := NewCluster(t, 4, "events", "other")
	cl := c.Client(t)
	if len(c.Addrs()) == 0 {
		t.Fatal("no broker addresses")
	}

	const n = 10_000
	Produce(t, cl, "events", n, func(i int) *kgo.Record {
		return &kgo.Record{
			Partition: int32(i % 4),
			Key:       fmt.Appendf(nil, "k%d", i),
			Value:     fmt.Appendf(nil, `{"i":%d}`, i),
		}
	})
	got := EndOffsets(t, cl, "events")
	want := map[int32]int64{0: n / 4, 1: n / 4, 2: n / 4, 3: n / 4}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("EndOffsets = %v, want %v", got, want)
	}
	if got := EndOffsets(t, cl, "other"); !reflect.DeepEqual(got, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}) {
		t.Fatalf("EndOffsets(other) = %v, want four empty partitions", got)
	}

	// Records land in the partition gen chose, in gen's order.
	cons := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"events": {3: kgo.NewOffset().AtStart()},
	}))
	recs := Poll(t, cons, 5)
	for j, r := range recs {
		if r.Partition != 3 || r.Offset != int64(j) || string(r.Key) != fmt.Sprintf("k%d", 3+4*j) {
			t.Fatalf("record %d: partition %d offset %d key %q; want partition 3 offset %d key k%d",
				j, r.Partition, r.Offset, r.Key, j, 3+4*j)
		}
	}

	// CommittedOffsets: nothing committed yet, then what was committed.
	if got := CommittedOffsets(t, cl, "g1", "events"); len(got) != 0 {
		t.Fatalf("CommittedOffsets before commit = %v, want empty", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	offs := make(kadm.Offsets)
	offs.AddOffset("events", 0, 100, -1)
	offs.AddOffset("events", 2, 2500, -1)
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, "g1", offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got, want := CommittedOffsets(t, cl, "g1", "events"), map[int32]int64{0: 100, 2: 2500}; !reflect.DeepEqual(got, want) {
		t.Fatalf("CommittedOffsets = %v, want %v", got, want)
	}
}

func TestProduceReportsErrors(t *testing.T) {
	c := NewCluster(t, 2, "events")
	cl := c.Client(t, kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(5*time.Second))
	r := capture(t, func(tb testing.TB) {
		Produce(tb, cl, "events", 10, func(i int) *kgo.Record {
			return &kgo.Record{Partition: 7, Value: []byte("x")} // no partition 7
		})
	})
	if !r.Failed() {
		t.Fatal("Produce to a missing partition did not fail")
	}
	t.Logf("Produce failed as expected: %s", r.text())
}

// pollN polls cl until it has n records, or fails after a minute.

func TestParseDefaultName(t *testing.T) {
	tests := []struct {
		name      string
		topic     string
		partition int32
		start     int64
		ok        bool
	}{
		{"events-0-0.jsonl", "events", 0, 0, true},
		{"events-3-12345.jsonl.gz", "events", 3, 12345, true},
		{"dir/sub/events-3-00000000000000012345.jsonl.zst", "events", 3, 12345, true},
		{"orders-eu-west-12-7.jsonl.snappy", "orders-eu-west", 12, 7, true},
		{"a.b_c-1-2-3-4", "a.b_c-1-2", 3, 4, true},
		{"my.topic.v2-1-99.jsonl", "my.topic.v2", 1, 99, true},
		{"events-0.jsonl", "", 0, 0, false},
		{"events-x-0.jsonl", "", 0, 0, false},
		{"-0-0.jsonl", "", 0, 0, false},
		{"events-0-0.jsonl.1", "", 0, 0, false},
		{"events-99999999999-0.jsonl", "", 0, 0, false},
	}
	for _, tc := range tests {
		topic, p, start, ok := ParseDefaultName(tc.name)
		if ok != tc.ok || topic != tc.topic || p != tc.partition || start != tc.start {
			t.Errorf("ParseDefaultName(%q) = %q, %d, %d, %v; want %q, %d, %d, %v",
				tc.name, topic, p, start, ok, tc.topic, tc.partition, tc.start, tc.ok)
		}
	}
}

// jsonlLines renders offsets [from, to) as jsonl lines like Spillway writes.
func jsonlLines(from, to int64) []byte {
	var b bytes.Buffer
	for o := from; o < to; o++ {
		switch o % 3 {
		case 0:
			fmt.Fprintf(&b, `{"key":"k%d","value":{"n":%d},"offset":%d,"timestamp":%d,"headers":[{"key":"h","value":"v"}]}`+"\n",
				o, o, o, 1733150000000+o)
		case 1:
			fmt.Fprintf(&b, `{"key":null,"value":"text %d","offset":%d,"timestamp":%d,"headers":[]}`+"\n", o, o, 1733150000000+o)
		default:
			fmt.Fprintf(&b, `{"key":"k%d","value":null,"offset":%d,"timestamp":%d}`+"\n", o, o, 1733150000000+o)
		}
	}
	return b.Bytes()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	switch filepath.Ext(path) {
	case ".gz":
		w := gzip.NewWriter(&b)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case ".zst":
		w, err := zstd.NewWriter(&b, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case ".snappy":
		w := snappy.NewBufferedWriter(&b)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		b.Write(data)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeOutput writes a hand-made output folder: topic "orders-eu", partition 0
// offsets [0,300) in gzip and zstd files, partition 1 [0,120) in snappy and
// plain files, in a sub-folder, plus hidden files that must be skipped.
func fakeOutput(t *testing.T) string {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "orders-eu-0-0.jsonl.gz"), jsonlLines(0, 100))
	writeFile(t, filepath.Join(dir, "orders-eu-0-100.jsonl.zst"), jsonlLines(100, 300))
	writeFile(t, filepath.Join(dir, "sub", "orders-eu-1-0.jsonl.snappy"), jsonlLines(0, 60))
	writeFile(t, filepath.Join(dir, "sub", "orders-eu-1-60.jsonl"), jsonlLines(60, 120))
	writeFile(t, filepath.Join(dir, ".orders-eu-0-0.jsonl.tmp"), []byte("not json"))
	writeFile(t, filepath.Join(dir, ".staging", "orders-eu-0-0.jsonl"), []byte("not json"))
	return dir
}

func TestReadJSONL(t *testing.T) {
	recs := ReadJSONL(t, fakeOutput(t))
	if len(recs) != 420 {
		t.Fatalf("read %d records, want 420", len(recs))
	}
	byPart := map[int32]int{}
	for _, r := range recs {
		if r.Topic != "orders-eu" {
			t.Fatalf("record topic %q, want orders-eu (%+v)", r.Topic, r)
		}
		byPart[r.Partition]++
		if r.Timestamp != 1733150000000+r.Offset {
			t.Fatalf("record %s:%d timestamp %d", r.File, r.Line, r.Timestamp)
		}
	}
	if byPart[0] != 300 || byPart[1] != 120 {
		t.Fatalf("records per partition %v, want 0:300 1:120", byPart)
	}

	// Fields of the three line shapes, from the zstd file.
	find := func(p int32, off int64) StoredRecord {
		for _, r := range recs {
			if r.Partition == p && r.Offset == off {
				return r
			}
		}
		t.Fatalf("no record p%d offset %d", p, off)
		return StoredRecord{}
	}
	r := find(0, 150)
	if string(r.Key) != `"k150"` || string(r.Value) != `{"n":150}` || len(r.Headers) != 1 ||
		r.Headers[0]["key"] != "h" || r.Headers[0]["value"] != "v" || !strings.HasSuffix(r.File, "orders-eu-0-100.jsonl.zst") || r.Line != 51 {
		t.Fatalf("record 150 = %+v", r)
	}
	r = find(1, 61)
	if string(r.Key) != "null" || string(r.Value) != `"text 61"` || len(r.Headers) != 0 {
		t.Fatalf("record 61 = %+v", r)
	}
	r = find(1, 2)
	var v any
	if err := json.Unmarshal(r.Value, &v); err != nil || v != nil || string(r.Key) != `"k2"` {
		t.Fatalf("record p1 offset 2 = %+v (value %v, %v)", r, v, err)
	}

	AssertExactlyOnce(t, recs, "orders-eu", map[int32]int64{0: 300, 1: 120})
	AssertExactlyOnceRanges(t, recs, "orders-eu", map[int32][2]int64{0: {0, 300}, 1: {0, 120}})
	// Other topics are ignored.
	AssertExactlyOnce(t, recs, "orders-us", nil)
}

func TestReadJSONLRejectsBadFiles(t *testing.T) {
	for name, data := range map[string][]byte{
		"events-0-0.jsonl":      []byte(`{"offset":0}` + "\n\n" + `{"offset":1}` + "\n"),
		"events-0-1.jsonl":      []byte(`{"key":"k"}` + "\n"),
		"events-0-2.jsonl":      []byte(`{"offset":0,"key":` + "\n"),
		"events-0-3.jsonl.gz":   []byte("not gzip"),
		"events.jsonl":          []byte(`{"offset":0}` + "\n"),
		"events-0-4.jsonl.zst2": []byte("x"),
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if rec := capture(t, func(tb testing.TB) { ReadJSONL(tb, dir) }); !rec.Failed() {
			t.Errorf("ReadJSONL accepted %s: %q", name, data)
		} else {
			t.Logf("%s rejected: %s", name, rec.text())
		}
	}
}

func TestAssertExactlyOnceDetectsDuplicatesAndGaps(t *testing.T) {
	recs := ReadJSONL(t, fakeOutput(t))
	want := map[int32]int64{0: 300, 1: 120}

	var dupGap []StoredRecord
	for _, r := range recs {
		if r.Partition == 1 && r.Offset == 7 { // a gap at p1/7
			continue
		}
		dupGap = append(dupGap, r)
		if r.Partition == 0 && r.Offset == 42 { // a duplicate at p0/42
			r.File = "elsewhere/orders-eu-0-42.jsonl"
			dupGap = append(dupGap, r)
		}
	}
	rec := capture(t, func(tb testing.TB) { AssertExactlyOnce(tb, dupGap, "orders-eu", want) })
	msg := rec.text()
	for _, s := range []string{
		"partition 0 [0, 300): 1 duplicated (first: 42(x2))",
		"partition 1 [0, 120): 1 missing (first: 7)",
		"got 420 records, want 420; 1 missing, 1 duplicated offsets",
		"elsewhere/orders-eu-0-42.jsonl",
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("failure message lacks %q:\n%s", s, msg)
		}
	}

	// A partition that was not expected, and offsets past the end.
	rec = capture(t, func(tb testing.TB) { AssertExactlyOnce(tb, recs, "orders-eu", map[int32]int64{0: 290}) })
	msg = rec.text()
	for _, s := range []string{
		"partition 1: 120 records, but this partition was not expected",
		"partition 0 [0, 290): 10 records out of range (first offsets: [290 291 292 293 294])",
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("failure message lacks %q:\n%s", s, msg)
		}
	}

	// Nothing stored at all.
	rec = capture(t, func(tb testing.TB) { AssertExactlyOnce(tb, nil, "orders-eu", want) })
	if msg := rec.text(); !strings.Contains(msg, "300 missing (first: 0, 1, 2, 3, 4)") {
		t.Errorf("failure message for no records:\n%s", msg)
	}

	// Ranges: p0 [100,300) holds offsets below 100 too.
	rec = capture(t, func(tb testing.TB) {
		AssertExactlyOnceRanges(tb, recs, "orders-eu", map[int32][2]int64{0: {100, 300}, 1: {0, 120}})
	})
	if msg := rec.text(); !strings.Contains(msg, "partition 0 [100, 300): 100 records out of range") {
		t.Errorf("failure message for ranges:\n%s", msg)
	}
}

func TestTCPPeersNamesAnOpenConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	want := conn.LocalAddr().String() + " -> " + ln.Addr().String()
	if peers := TCPPeers(); !slices.Contains(peers, want) {
		t.Fatalf("TCPPeers() = %q, want it to hold %q", peers, want)
	}
}
