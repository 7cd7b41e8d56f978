package runner

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
)

// The stall clock on a clock the test moves: lag without progress stalls
// once the timeout has passed; no lag, back pressure and progress each
// restart it.
func TestMonitorStall(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	m := newMonitor(time.Minute)
	m.now = func() time.Time { return now }
	m.progressed = now
	p := progressMark{written: 10}
	step := func(d time.Duration, p progressMark, lag int64, held bool) bool {
		now = now.Add(d)
		stalled, _ := m.observe(p, lag, held)
		return stalled
	}
	if step(0, p, 5, false) {
		t.Fatal("stalled at once")
	}
	if step(59*time.Second, p, 5, false) {
		t.Error("stalled before the timeout")
	}
	if !step(time.Second, p, 5, false) {
		t.Error("not stalled after a minute of lag without progress")
	}
	p.committed++
	if step(time.Second, p, 5, false) {
		t.Error("still stalled after a commit")
	}
	if step(2*time.Minute, p, 0, false) {
		t.Error("stalled with no lag: nothing to do is not a stall")
	}
	if step(2*time.Minute, p, 5, true) {
		t.Error("stalled while the budget holds fetching back")
	}
	if !step(time.Minute, p, 5, false) {
		t.Error("not stalled a minute after the budget let go, with no progress")
	}
	p.stored++
	if step(0, p, 5, false) {
		t.Error("still stalled after a file was stored")
	}
}

func TestMonitorHistory(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	m := newMonitor(time.Minute)
	m.now = func() time.Time { return now }
	m.lastAt = now
	for i := range samples + 3 {
		now = now.Add(sampleEvery)
		m.sample(progressMark{written: int64(i+1) * 50, bytes: int64(i+1) * 500}, int64(i))
	}
	for i := range closesKept + 2 {
		m.onClose(offsets.Closed{Key: strings.Repeat("k", i+1), Reason: offsets.ReasonAge})
	}
	s, c := m.history()
	if len(s) != samples || s[0].LagRecords != 3 || s[len(s)-1].LagRecords != samples+2 {
		t.Errorf("samples: %d, lag first %d last %d; want %d oldest first", len(s), s[0].LagRecords, s[len(s)-1].LagRecords, samples)
	}
	if r := s[len(s)-1].RecordsPerSecond; r != 50/sampleEvery.Seconds() {
		t.Errorf("records/s %v, want %v", r, 50/sampleEvery.Seconds())
	}
	if len(c) != closesKept || len(c[0].Key) != closesKept+2 {
		t.Errorf("closes: %d, newest key length %d; want %d newest first", len(c), len(c[0].Key), closesKept)
	}
}

// TestStalledStorageFailsHealthz stalls storage with the budget far from
// full: files close and wait for an upload that never ends, nothing is
// committed, and the partitions lag. /healthz must fail, saying why, and
// pass again once storage is back; no record is lost or stored twice.
func TestStalledStorageFailsHealthz(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	gen := func(i int) *kgo.Record { return &kgo.Record{Partition: int32(i % 2), Value: []byte(`{"n":1}`)} }
	testkit.Produce(t, cl, "events", 100, gen)

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.File.MaxRecords = 50
	cfg.Admin.StallTimeout = 2 * time.Second
	faults := &storage.Faults{}
	progress, stop := startedWith(t, cfg, Options{StorageFaults: faults})
	defer func() { faults.Resume(); _ = stop() }()
	waitCommitted(t, cl, cfg.Kafka.Group, testkit.EndOffsets(t, cl, "events"))

	healthz := func() (int, string) {
		srv := httptest.NewServer(admin.New("", admin.SourceFunc(progress().Status), nil).Handler())
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := healthz(); code != http.StatusOK {
		t.Fatalf("/healthz before the stall: %d %s", code, body)
	}

	faults.Stall()
	testkit.Produce(t, cl, "events", 100, gen)
	waitFor(t, "the status to say stalled", func() bool { return progress().Status().Stalled })
	st := progress().Status()
	t.Logf("stalled: %s", st.StalledReason)
	if st.LagRecords != 100 || st.FetchPaused || !strings.Contains(st.StalledReason, "100 records lag") ||
		!strings.Contains(st.StalledReason, "storage or the sink is stuck") {
		t.Errorf("status while stalled: lag %d, fetch paused %v, reason %q", st.LagRecords, st.FetchPaused, st.StalledReason)
	}
	code, body := healthz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stalled: no progress for") {
		t.Errorf("/healthz while stalled: %d %q, want 503 naming the stall", code, body)
	}

	faults.Resume()
	end := testkit.EndOffsets(t, cl, "events")
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	waitFor(t, "healthy again", func() bool { return !progress().Status().Stalled })
	if code, body := healthz(); code != http.StatusOK {
		t.Errorf("/healthz after storage came back: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", end)
}
