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
	// sampleEvery and samples size the throughput history the status page
	// draws: ten minutes.
	sampleEvery = 3 * time.Second
	samples     = 200
	// closesKept is how many recent file closes the status page lists.
	closesKept = 20
)

// monitor keeps what the status page and /healthz need beyond the
// counters: throughput samples, recent file closes, and when the pipeline
// last progressed. See docs/design.md, "Operating it".
type monitor struct {
	stallTimeout time.Duration
	now          func() time.Time

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

func newMonitor(stallTimeout time.Duration) *monitor {
	m := &monitor{stallTimeout: stallTimeout, now: time.Now}
	m.progressed = m.now()
	m.lastAt = m.progressed
	return m
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

// observe updates the stall clock. Lag with no progress counts towards a
// stall unless held explains it: back pressure (the budget above its high
// watermark: storage is slow, and the budget alerts say so) or a wait for
// an unreachable schema registry (its own alert); no lag is never a
// stall. It returns whether the pipeline is stalled, and since
// when it last progressed.
func (m *monitor) observe(p progressMark, lag int64, held bool) (bool, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if p != m.seen || lag <= 0 || held {
		m.seen, m.progressed = p, now
	}
	since := now.Sub(m.progressed)
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

// run samples every sampleEvery until ctx ends.
func (m *monitor) run(ctx context.Context, p *Progress) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mark, lag := p.mark()
		m.sample(mark, lag)
	}
}

func stallReason(since time.Duration, lag int64, st admin.Status) string {
	return fmt.Sprintf("no progress for %s (no record written, file stored or offset committed) while %d records lag, and the memory budget is not full (%d of %d bytes): "+
		"storage or the sink is stuck; %d uploads in flight, %d files open",
		since.Round(time.Second), lag, st.BudgetUsedBytes, st.BudgetLimitBytes, st.UploadsInFlight, st.OpenFiles)
}
