package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
)

// logBuffer is a slog destination a test can read while the pipeline runs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.buf.String()) {
		if strings.Contains(line, substr) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestRecordsLargerThanTheBudget drains records larger than the fetch share
// of a 64MiB limit (8MiB), two of them one after the other, and one larger
// than the budget's high watermark (29MiB) that opens a file, as the Kafka
// client returns them: whole, each in a fetch of its own. They
// must all be stored, once; each partition warns once, naming the record
// and backpressure.memory_limit; the budget counts them apart, so that
// waiting for room they take can't block (it did: the polled record was
// counted against the limit it alone exceeded, and the consumer waited for
// it to go below the low watermark forever); and they go to storage piece
// by piece, so that the budget stays within its limit.
func TestRecordsLargerThanTheBudget(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t, kgo.ProducerBatchMaxBytes(48<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	maxBytes := fmt.Sprint(48 << 20)
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &maxBytes}}, "events"); err != nil {
		t.Fatal(err)
	}
	text := func(n int, tag string) []byte {
		return bytes.Repeat([]byte(tag+" \"quoted\" text, café\n"), n/len(tag+" \"quoted\" text, café\n")+1)[:n]
	}
	values := map[int32][][]byte{
		0: {[]byte(`{"n":0}`), text(12<<20, "a"), text(10<<20, "b"), []byte(`{"n":3}`)},
		1: {text(30<<20, "c"), []byte(`{"n":1}`)},
	}
	for p, vs := range values {
		for _, v := range vs {
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "events", Partition: p, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := testkit.EndOffsets(t, cl, "events")

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Backpressure.MemoryLimit = "64MiB"
	cfg.Format.Compression = "none"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	var progress atomic.Pointer[Progress]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// Storage slower than encoding, as a remote store is: a record
		// queued whole would hold its size a second time.
		faults := &storage.Faults{BytesPerSecond: 100 << 20}
		done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{OnStart: progress.Store, StorageFaults: faults})
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	snap := progress.Load().Budget()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	done <- nil

	stored := testkit.ReadJSONL(t, dir)
	testkit.AssertExactlyOnce(t, stored, "events", end)
	for _, r := range stored {
		if r.Offset < 0 || r.Offset >= int64(len(values[r.Partition])) {
			continue
		}
		want := values[r.Partition][r.Offset]
		if len(want) > 1<<20 && len(r.Value) < len(want) {
			t.Errorf("partition %d offset %d: stored %d bytes of value, want the %d produced", r.Partition, r.Offset, len(r.Value), len(want))
		}
	}

	var warnings []string
	for _, l := range logs.lines("backpressure.memory_limit") {
		if strings.Contains(l, "level=WARN") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 2 {
		t.Fatalf("%d warnings naming backpressure.memory_limit, want one per partition:\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
	for _, want := range []string{"partition=0 offset=1 record_bytes=", "partition=1 offset=0 record_bytes="} {
		if !strings.Contains(strings.Join(warnings, "\n"), want) {
			t.Errorf("no warning with %q:\n%s", want, strings.Join(warnings, "\n"))
		}
	}

	// The accountant: within its limit, the large records apart.
	plan := progress.Load().Plan
	if snap.Peak > snap.Limit+2<<20 {
		t.Errorf("budget peak %d over its limit %d: the large records were counted against it, or queued whole", snap.Peak, snap.Limit)
	}
	if snap.PeakUnreserved < 30<<20-plan.Reserved || snap.PeakUnreserved > 42<<20+1<<20 {
		t.Errorf("peak held apart %d, want the records beyond the fetch share (30MiB less %d, at most two records)", snap.PeakUnreserved, plan.Reserved)
	}
	t.Logf("budget: limit %d, peak %d; held apart at most %d (records beyond the fetch share of %d)", snap.Limit, snap.Peak, snap.PeakUnreserved, plan.Reserved)
}

// MemoryWarnings tells when the storage settings can't fit in the data
// budget, from the plan's own division, and names what to change.
func TestMemoryWarnings(t *testing.T) {
	t.Parallel()
	warnings := func(url, limit, compression string, maxOpen int) []string {
		t.Helper()
		cfg := config.Default()
		cfg.Kafka.Topics = []string{"events"}
		cfg.Storage.URL = url
		cfg.Backpressure.MemoryLimit = limit
		cfg.Backpressure.MaxOpenFiles = maxOpen
		cfg.Format.Compression = compression
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		w, err := MemoryWarnings(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for _, ok := range []struct {
		url, limit string
		maxOpen    int
	}{
		{"file:///tmp/out", "64MiB", 0},
		{"s3://b?region=us-east-1", "256MiB", 0},
		{"gs://b", "128MiB", 0},
		{"s3://b?region=us-east-1", "1GiB", 0},
	} {
		if w := warnings(ok.url, ok.limit, "zstd", ok.maxOpen); len(w) != 0 {
			t.Errorf("%s with %s: %q, want no warning", ok.url, ok.limit, w)
		}
	}
	// S3 with the default 8MiB parts: one open file holds five parts
	// (40MiB), more than the whole 32MiB data budget of 64MiB.
	w := warnings("s3://b?region=us-east-1", "64MiB", "zstd", 0)
	if len(w) != 1 {
		t.Fatalf("S3 in 64MiB: %q, want one warning", w)
	}
	for _, want := range []string{"backpressure.memory_limit 64MiB", "data budget of 32MiB", "8MiB for fetches",
		"43MiB for one open file (2MiB of zstd state, 40MiB of writer buffers, a 0.2MiB chunk)", "32MiB for storage.upload_concurrency 4 × 8MiB", "at least", "storage.part_size"} {
		if !strings.Contains(w[0], want) {
			t.Errorf("warning lacks %q:\n%s", want, w[0])
		}
	}
	min := strings.Fields(w[0][strings.Index(w[0], "at least ")+len("at least "):])[0]
	if got := warnings("s3://b?region=us-east-1", strings.TrimSuffix(min, ","), "zstd", 0); len(got) != 0 {
		t.Errorf("the limit the warning names (%s) still warns: %q", min, got)
	}
	// An explicit cap on open files is counted as it is set.
	w = warnings("file:///tmp/out", "64MiB", "zstd", 20)
	if len(w) != 1 || !strings.Contains(w[0], "backpressure.max_open_files 20 open files of 2.2MiB each") || !strings.Contains(w[0], "or backpressure.max_open_files") {
		t.Errorf("20 open zstd files in 64MiB: %q, want a warning that counts them", w)
	}
	// With a spool, the cap on open files costs next to nothing: the
	// encode slots are what is counted.
	cfg := config.Default()
	cfg.Kafka.Topics = []string{"events"}
	cfg.Storage.URL = "file:///tmp/out"
	cfg.Backpressure.MemoryLimit = "64MiB"
	cfg.Backpressure.MaxOpenFiles = 2000
	cfg.Backpressure.SpoolDir = t.TempDir()
	cfg.Format.Compression = "zstd"
	if w, err := MemoryWarnings(cfg); err != nil || len(w) != 0 {
		t.Errorf("2000 spooled files in 64MiB: %q %v, want no warning", w, err)
	}
	cfg.Storage.URL = "s3://b?region=us-east-1"
	if w, err := MemoryWarnings(cfg); err != nil || len(w) != 1 || !strings.Contains(w[0], "encode slots (one per core, with backpressure.spool_dir)") || strings.Contains(w[0], "or backpressure.max_open_files") {
		t.Errorf("S3 with a spool in 64MiB: %q %v, want a warning that counts the encode slots", w, err)
	}
	// auto says what it resolved to.
	p, where, err := MemoryPlan(config.Backpressure{MemoryLimit: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	cfg = config.Default()
	cfg.Storage.URL = "s3://b?region=us-east-1"
	cfg.Storage.PartSize = 64 << 20
	cfg.Backpressure.MemoryLimit = "auto"
	if w := memoryWarnings(cfg, sizingIn(cfg, budget.Plan{Process: 64 << 20, Data: 32 << 20, Reserved: 8 << 20}, where)); len(w) != 1 ||
		!strings.Contains(w[0], "backpressure.memory_limit auto, which is 64MiB here ("+where+")") {
		t.Errorf("auto: %q, want it to name what auto gives here (%s, plan %v)", w, where, p)
	}
}

// A stop ends within shutdown.timeout even while a record larger than the
// budget waits for storage that takes nothing: the deadline runs from the
// stop, not from when the consumer returns, which it can't while its write
// waits.
func TestStopEndsAWriteWaitingForStorage(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t, kgo.ProducerBatchMaxBytes(48<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	maxBytes := fmt.Sprint(48 << 20)
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &maxBytes}}, "events"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "events", Value: bytes.Repeat([]byte("x"), 40<<20)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(cluster.Addrs(), t.TempDir())
	cfg.Backpressure.MemoryLimit = "64MiB"
	cfg.Format.Compression = "none"
	cfg.Shutdown.Timeout = 2 * time.Second
	faults := &storage.Faults{}
	faults.Stall()
	defer faults.Resume()
	progress, stop := startedWith(t, cfg, Options{StorageFaults: faults})
	waitFor(t, "the record to take the budget over its limit", func() bool {
		p := progress()
		return p != nil && p.Budget().Used > p.Budget().Limit
	})
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("Run returned nil: the record can't have been stored while storage took nothing")
		}
		t.Logf("Run: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Run still runs a minute after a stop with shutdown.timeout 2s")
	}
}
