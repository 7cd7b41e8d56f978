package runner

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// manualClock is a clock the test moves, with ticks it sends: the stall
// clock is about minutes, which a test can't wait for.
type manualClock struct {
	mu    sync.Mutex
	now   time.Time
	ticks chan time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Tick(time.Duration) (<-chan time.Time, func()) { return c.ticks, func() {} }

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// tick has the monitor look once, and returns when it has: the second
// send is only taken once the first tick's work is done.
func (c *manualClock) tick() {
	c.ticks <- c.Now()
	c.ticks <- c.Now()
}

// TestStatusDoesNotMoveTheStallClock: asking for the status, however
// often, changes no liveness; only the monitor's own look does. Status
// once updated the stall clock itself, so progress counted from when an
// admin request happened to see it: here, the look at 30s would have
// restarted the clock and hidden the stall at 61s.
func TestStatusDoesNotMoveTheStallClock(t *testing.T) {
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	gen := func(int) *kgo.Record { return &kgo.Record{Value: []byte(`{"n":1}`)} }
	testkit.Produce(t, cl, "events", 100, gen)

	cfg := testConfig(cluster.Addrs(), t.TempDir())
	// No file closes, so nothing commits and the partition lags.
	cfg.File.MaxAge = time.Hour
	cfg.Admin.StallTimeout = time.Minute
	clock := &manualClock{now: time.Unix(1000, 0), ticks: make(chan time.Time)}
	progress, stop := startedWith(t, cfg, Options{Clock: clock})
	lagging := func(n int64) func() bool {
		return func() bool {
			p := progress()
			if p == nil {
				return false
			}
			_, lag, _ := p.mark()
			return p.Sink().Records == n && lag == n
		}
	}
	waitFor(t, "100 records written, lagging", lagging(100))
	clock.tick() // sees the 100 records: progress, at 1000s

	testkit.Produce(t, cl, "events", 10, gen)
	waitFor(t, "110 records written, lagging", lagging(110))
	clock.add(30 * time.Second)
	for range 5 {
		if st := progress().Status(); st.Stalled || st.LastProgressSeconds != 30 {
			t.Fatalf("at 30s: stalled %v, last progress %vs ago; want not stalled, 30s", st.Stalled, st.LastProgressSeconds)
		}
	}
	clock.add(31 * time.Second)
	if st := progress().Status(); !st.Stalled || st.LastProgressSeconds != 61 {
		t.Fatalf("at 61s, with no look since the first: stalled %v, last progress %vs ago; want stalled, 61s: a status read moved the stall clock",
			st.Stalled, st.LastProgressSeconds)
	}
	clock.tick() // sees the 10 records
	if st := progress().Status(); st.Stalled || st.LastProgressSeconds != 0 {
		t.Fatalf("after the monitor saw progress: stalled %v, last progress %vs ago; want not stalled, 0s", st.Stalled, st.LastProgressSeconds)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

// TestDrainedIsNeverStalled: a pipeline that has stored and committed
// every record is not stalled, however long since the monitor last looked.
// The look that saw the drain can come late on a busy machine (here it
// never comes), and the stall clock, read between looks, then ran past
// the timeout: /healthz said "stalled ... while 0 records lag" (seen in
// TestStalledStorageFailsHealthz beside a CPU hog).
func TestDrainedIsNeverStalled(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 100, func(int) *kgo.Record { return &kgo.Record{Value: []byte(`{"n":1}`)} })
	cfg := testConfig(cluster.Addrs(), t.TempDir())
	cfg.File.MaxRecords = 50
	cfg.File.MaxAge = time.Hour
	cfg.Admin.StallTimeout = time.Minute
	clock := &manualClock{now: time.Unix(1000, 0), ticks: make(chan time.Time)}
	progress, stop := startedWith(t, cfg, Options{Clock: clock})
	waitCommitted(t, cl, cfg.Kafka.Group, testkit.EndOffsets(t, cl, "events"))
	waitFor(t, "no lag", func() bool { return progress().Status().LagRecords == 0 })
	clock.add(2 * time.Minute) // and no look since the start
	if st := progress().Status(); st.Stalled {
		t.Fatalf("drained, with no look for 2 minutes: stalled (%s), want not stalled", st.StalledReason)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}
