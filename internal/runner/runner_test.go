package runner

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

func TestMain(m *testing.M) {
	// The tests here wait (on the broker, on storage, on files to close)
	// far more than they compute: serially the package used about a third
	// of a core. So more of the parallel ones run at once than the default,
	// GOMAXPROCS; an explicit -parallel still wins.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", "4"); err != nil {
			panic(err)
		}
	}
	dir, err := os.MkdirTemp("", "spillway-runner-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner: temp dir for test programs:", err)
		os.Exit(1)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// testLogger is the logger of a test's runs: stderr under -v. Without -v
// the runs log into a buffer, printed if the test fails, so that a
// failure in CI says what the runs did. (Call it on the test's goroutine:
// it registers a cleanup.) A benchmark's runs log nowhere.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var logs lockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the runs' log (testLogger):\n%s", logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(&logs, nil))
}

func testConfig(brokers []string, dir string) *config.Config {
	cfg := config.Default()
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.Group = "sink-test"
	cfg.Kafka.Topics = []string{"events"}
	// Escaped: a benchmark run in rounds has # in its temp directory.
	cfg.Storage.URL = (&url.URL{Scheme: "file", Path: dir}).String()
	cfg.File.MaxRecords = 5000
	cfg.File.MaxAge = 2 * time.Second
	cfg.Format.Compression = "zstd"
	cfg.Backpressure.MemoryLimit = "256MiB"
	cfg.Admin.Listen = ""
	cfg.Shutdown.Timeout = 20 * time.Second
	return cfg
}

// started runs the pipeline in the background and returns a stop function
// that asks for a graceful stop and returns Run's error.
func started(t *testing.T, cfg *config.Config) (progress func() *Progress, stop func() error) {
	return startedWith(t, cfg, Options{})
}

func startedWith(t *testing.T, cfg *config.Config, opts Options) (progress func() *Progress, stop func() error) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var p atomic.Pointer[Progress]
	done := make(chan error, 1)
	opts.OnStart = p.Store
	log := testLogger(t)
	go func() { done <- Run(ctx, cfg, log, opts) }()
	var stopped bool
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return p.Load, stop
}

// waitDeadline only turns a hang into a failure. It is minutes: the tests
// run in parallel, on machines shared with other work, and a drain that
// takes a minute alone can take several then.
const waitDeadline = 5 * time.Minute

// waitCommitted waits until the group's committed offsets reach want. It
// never asserts on speed: the deadline only turns a hang into a failure.
func waitCommitted(t *testing.T, cl *kgo.Client, group string, want map[int32]int64) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for {
		got := testkit.CommittedOffsets(t, cl, group, "events")
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets %v never reached end offsets %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEndToEnd drains 100k records, some produced by kcat (a non-Go client)
// with gzip, zstd, lz4 and snappy, keys, headers and null values, and checks
// every offset is stored exactly once and committed offsets equal end offsets.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 8, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 100_000, func(i int) *kgo.Record {
		r := &kgo.Record{Partition: int32(i % 8), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
		switch i % 10 {
		case 3:
			r.Value = nil // a tombstone
		case 7:
			r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte("t" + fmt.Sprint(i))}}
		}
		return r
	})
	var kcatLines []string
	for i := range 500 {
		kcatLines = append(kcatLines, fmt.Sprintf("kkey-%d\tkcat value %d", i, i))
	}
	for p, codec := range []string{"gzip", "zstd", "lz4", "snappy"} {
		outside.KcatProduce(t, cluster.Addrs(), "events", int32(p), codec, kcatLines, true)
	}
	end := testkit.EndOffsets(t, cl, "events")

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	_, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}

	recs := testkit.ReadJSONL(t, dir)
	testkit.AssertExactlyOnce(t, recs, "events", end)
	if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); !maps.Equal(got, end) {
		t.Errorf("after stop, committed %v, want end offsets %v", got, end)
	}

	var kcatSeen, nulls, headers int
	for _, r := range recs {
		var s string
		if json.Unmarshal(r.Value, &s) == nil && strings.HasPrefix(s, "kcat value ") {
			kcatSeen++
			var k string
			if err := json.Unmarshal(r.Key, &k); err != nil || !strings.HasPrefix(k, "kkey-") {
				t.Fatalf("kcat record %s/%d@%d: key %s", r.Topic, r.Partition, r.Offset, r.Key)
			}
			if len(r.Headers) != 2 {
				t.Fatalf("kcat record @%d: headers %v, want h1 and trace", r.Offset, r.Headers)
			}
		}
		if string(r.Value) == "null" {
			nulls++
		}
		if len(r.Headers) == 1 && r.Headers[0]["key"] == "trace" {
			headers++
		}
	}
	if kcatSeen != 4*500 {
		t.Errorf("found %d kcat records, want 2000", kcatSeen)
	}
	if nulls != 10_000 || headers != 10_000 {
		t.Errorf("found %d null values and %d records with one header, want 10000 each", nulls, headers)
	}
}

// A taken admin port stops startup with a message naming the key, before
// anything is consumed.
func TestAdminPortTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cluster := testkit.NewCluster(t, 1, "events")
	cfg := testConfig(cluster.Addrs(), t.TempDir())
	cfg.Admin.Listen = ln.Addr().String()
	err = Run(context.Background(), cfg, testLogger(t), Options{})
	if err == nil || !strings.Contains(err.Error(), "admin.listen") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Run with a taken admin port = %v, want an error naming admin.listen", err)
	}
}

// TestResumeFromStorage: a run stores and commits everything; then the
// group's commits are rolled back to zero, as if the process had crashed
// after its uploads and before its commits. The next run must resume from
// what storage holds, not write those records again.
func TestResumeFromStorage(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 4, "events")
	cl := cluster.Client(t)
	gen := func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	}
	testkit.Produce(t, cl, "events", 8_000, gen)
	end := testkit.EndOffsets(t, cl, "events")
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.File.MaxRecords = 300

	_, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	// The crash: storage holds everything, the group has committed nothing.
	zero := kadm.Offsets{}
	for p := range end {
		zero.AddOffset("events", p, 0, -1)
	}
	if _, err := kadm.NewClient(cl).CommitOffsets(context.Background(), cfg.Kafka.Group, zero); err != nil {
		t.Fatal(err)
	}
	testkit.Produce(t, cl, "events", 2_000, gen)
	end = testkit.EndOffsets(t, cl, "events")
	_, stop2 := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	if err := stop2(); err != nil {
		t.Fatalf("second graceful stop: %v", err)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", end)
}
