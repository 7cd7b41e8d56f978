package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/offsets"
)

const (
	// observeEvery is how often the monitor looks for progress: how late,
	// at most, a stall or the end of one is seen.
	observeEvery = time.Second
	// sampleEvery and samples size the throughput history the status page
	// draws: ten minutes.
	sampleEvery = 3 * observeEvery
	samples     = 200
	// closesKept is how many recent file closes the status page lists.
	closesKept = 20
)

// monitor keeps what the status page and /healthz need beyond the
// counters: throughput samples, recent file closes, and when the pipeline
// last progressed. See docs/design.md, "Operating it".
//
// Its own loop (run) is what moves the stall clock; everything else only
// reads it, so asking for the status any number of times changes nothing.
type monitor struct {
	stallTimeout time.Duration
	now          func() time.Time
	tick         func(d time.Duration) (<-chan time.Time, func())

	mu      sync.Mutex
	ring    [samples]admin.Sample
	n, next int
	last    progressMark // at the previous sample
	lastAt  time.Time

	closes    [closesKept]admin.FileClose
	nc, nextC int

	// progressed is when progress was last seen; seen the counters then.
	progressed time.Time
	seen       progressMark
}

// progressMark is what counts as progress: a record written, a file
// stored, an offset committed.
type progressMark struct {
	written, stored, committed int64
	bytes                      int64
}

// Clock is what the monitor reads the time from and ticks on.
type Clock interface {
	Now() time.Time
	// Tick ticks every d until stop is called.
	Tick(d time.Duration) (ticks <-chan time.Time, stop func())
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Tick(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func newMonitor(stallTimeout time.Duration) *monitor {
	m := &monitor{stallTimeout: stallTimeout}
	m.useClock(wallClock{})
	return m
}

// useClock makes c the monitor's clock; the pipeline's progress starts
// now.
func (m *monitor) useClock(c Clock) {
	m.now, m.tick = c.Now, c.Tick
	m.progressed = m.now()
	m.lastAt = m.progressed
}

// onClose records a closed file; the sink calls it with its lock held.
func (m *monitor) onClose(c offsets.Closed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closes[m.nextC] = admin.FileClose{Time: m.now(), Key: c.Key, Topic: c.Partition.Topic, Part: c.Partition.Partition,
		Reason: string(c.Reason), Records: c.Records}
	m.nextC = (m.nextC + 1) % closesKept
	m.nc = min(m.nc+1, closesKept)
}

// observe updates the stall clock; only the monitor's loop calls it. Lag
// with no progress counts towards a stall unless held explains it: back
// pressure (the budget above its high watermark: storage is slow, and the
// budget alerts say so) or a wait for an unreachable schema registry (its
// own alert); no lag is never a stall. It returns what liveness then
// returns.
func (m *monitor) observe(p progressMark, lag int64, held bool) (bool, time.Duration) {
	m.mu.Lock()
	if p != m.seen || lag <= 0 || held {
		m.seen, m.progressed = p, m.now()
	}
	m.mu.Unlock()
	return m.liveness()
}

// liveness reads the stall clock as the loop last set it: whether the
// pipeline is stalled, and how long ago it last progressed.
func (m *monitor) liveness() (bool, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	since := m.now().Sub(m.progressed)
	return since >= m.stallTimeout, since
}

// sample adds a throughput sample.
func (m *monitor) sample(p progressMark, lag int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	secs := now.Sub(m.lastAt).Seconds()
	if secs <= 0 {
		return
	}
	m.ring[m.next] = admin.Sample{Time: now, LagRecords: lag,
		RecordsPerSecond: float64(p.written-m.last.written) / secs,
		BytesPerSecond:   float64(p.bytes-m.last.bytes) / secs}
	m.next = (m.next + 1) % samples
	m.n = min(m.n+1, samples)
	m.last, m.lastAt = p, now
}

// history returns the samples oldest first and the closes newest first.
func (m *monitor) history() ([]admin.Sample, []admin.FileClose) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]admin.Sample, 0, m.n)
	for i := m.n; i > 0; i-- {
		out = append(out, m.ring[(m.next-i+samples)%samples])
	}
	cl := make([]admin.FileClose, 0, m.nc)
	for i := 1; i <= m.nc; i++ {
		cl = append(cl, m.closes[(m.nextC-i+closesKept)%closesKept])
	}
	return out, cl
}

// run looks for progress every observeEvery, and samples throughput every
// sampleEvery, until ctx ends.
func (m *monitor) run(ctx context.Context, p *Progress) {
	ticks, stop := m.tick(observeEvery)
	defer stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		mark, lag := m.look(p)
		if n%int(sampleEvery/observeEvery) == 0 {
			m.sample(mark, lag)
		}
	}
}

// look observes the pipeline's progress once. The pipeline takes a first
// look as it starts consuming, so that the stall clock starts there and
// not before the startup checks.
func (m *monitor) look(p *Progress) (progressMark, int64) {
	mark, lag, held := p.mark()
	m.observe(mark, lag, held)
	return mark, lag
}

func stallReason(since time.Duration, lag int64, st admin.Status) string {
	return fmt.Sprintf("no progress for %s (no record written, file stored or offset committed) while %d records lag, and the memory budget is not full (%d of %d bytes): "+
		"storage or the sink is stuck; %d uploads in flight, %d files open",
		since.Round(time.Second), lag, st.BudgetUsedBytes, st.BudgetLimitBytes, st.UploadsInFlight, st.OpenFiles)
}
