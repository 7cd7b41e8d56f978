package runner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
)

// heapObjects is the runtime/metrics name of the live heap.
const heapObjects = "/memory/classes/heap/objects:bytes"

// heapSampler records the highest live heap seen, from runtime/metrics.
type heapSampler struct {
	stop chan struct{}
	done chan uint64
}

// sampleHeap starts reading the live heap every interval, until Stop.
func sampleHeap(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan uint64)}
	go func() {
		s := []metrics.Sample{{Name: heapObjects}}
		var peak uint64
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				h.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// Stop stops sampling and returns the peak seen.
func (h *heapSampler) Stop() uint64 { close(h.stop); return <-h.done }

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// randomValue is incompressible enough that compression doesn't hide bytes.
func randomValue(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	fillLetters(r, b)
	return fmt.Appendf(b[:0], `{"v":"%s"}`, b[:n-8])
}

// fillLetters fills b with random lowercase letters, independent and as
// good as uniform (log2(26) bits each, the same entropy as one r.IntN(26)
// per letter, so files compress as much and no more), twelve from each
// 64-bit draw: under -race, a draw per letter made generating the records
// about a fifth of the time of the tests that produce tens of MiB of them
// (TestSlowStorageStaysInBudget, TestStorageFaults).
func fillLetters(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); {
		u := r.Uint64()
		for k := 0; k < 12 && i < len(b); k++ {
			b[i] = 'a' + byte(u%26)
			u /= 26
			i++
		}
	}
}

// TestSlowStorageStaysInBudget runs a fast backlog into slow storage (added
// latency and a bandwidth cap). The accountant's high-water mark must stay
// within the budget, the heap growth within the process limit, and every
// record must arrive.
func TestSlowStorageStaysInBudget(t *testing.T) {
	cluster := testkit.NewCluster(t, 8, "events")
	cl := cluster.Client(t)
	rng := rand.New(rand.NewPCG(1, 2))
	testkit.Produce(t, cl, "events", 30_000, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 8), Value: randomValue(rng, 1024)}
	})
	end := testkit.EndOffsets(t, cl, "events")

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Backpressure.MemoryLimit = "64MiB"
	cfg.Format.Compression = "gzip"
	cfg.File.MaxRecords = 0
	cfg.File.MaxBytes = 4 << 20
	faults := &storage.Faults{Latency: 2 * time.Millisecond, BytesPerSecond: 1 << 20}

	// As the binary does: GOMEMLIMIT from the plan, so that the heap
	// measured is what the pipeline holds, not garbage the collector had
	// no reason to reclaim yet (that made this test fail now and then).
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	base := heapNow()
	heap := sampleHeap(5 * time.Millisecond)
	progress, stop := startedWith(t, cfg, Options{StorageFaults: faults, SetGoMemLimit: true})
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	p := progress()
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	peakHeap := heap.Stop()

	snap := p.Budget()
	t.Logf("budget: limit %d, peak %d (%.0f%%); pauses %d; files %d by reason %v; heap growth peak %d MiB (process limit %d MiB)",
		snap.Limit, snap.Peak, 100*float64(snap.Peak)/float64(snap.Limit), p.Source().Pauses,
		p.Sink().FilesUploaded, p.Sink().Closed, int64(peakHeap-base)>>20, p.Plan.Process>>20)
	if bound := handoverBound(p); snap.Peak > bound {
		t.Errorf("accountant peak %d exceeds the budget %d plus one poll counted twice at the handover (%d)", snap.Peak, snap.Limit, bound)
	}
	// Whether it had to pause depends on how fast this machine consumes;
	// TestStorageStallPausesFetching makes the pause certain.
	if growth := int64(peakHeap) - int64(base); growth > p.Plan.Process {
		t.Errorf("heap grew by %d bytes, over the process limit %d", growth, p.Plan.Process)
	}
	if used := p.Budget().Used - p.Plan.Reserved; used != 0 {
		t.Errorf("after a clean stop the budget still counts %d bytes", used)
	}
	testkit.AssertExactlyOnce(t, readStoredOffsets(t, dir), "events", end)
}

// TestRecordCountThreshold: with plenty of bytes left, the record-count
// trigger alone flushes files early.
func TestRecordCountThreshold(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 10_000, func(i int) *kgo.Record {
		return &kgo.Record{Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	end := testkit.EndOffsets(t, cl, "events")
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Backpressure.MaxBufferedRecords = 1000
	cfg.File.MaxRecords = 0
	progress, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	p := progress()
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	closed := p.Sink().Closed
	t.Logf("files closed by reason: %v", closed)
	if closed[offsets.ReasonPressure] < 5 {
		t.Errorf("10000 records with max_buffered_records 1000 closed %d files for pressure, want >= 5 (%v)", closed[offsets.ReasonPressure], closed)
	}
	if snap := p.Budget(); snap.Peak >= snap.Limit/2 {
		t.Errorf("the byte budget was not the trigger here, yet peak %d is near the limit %d", snap.Peak, snap.Limit)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", end)
}

// handoverBound is the most the accountant may read: the budget, plus one
// poll counted twice while the Write that hands it to the files' encoders
// runs (the source's polled records and the sink's queue), and the same
// once the Write returned, queued beside a fetch share given back. Memory
// may hold that much: the client refills its fetch share as soon as a poll
// takes a fetch (see budget.Plan).
func handoverBound(p *Progress) int64 { return p.Budget().Limit + p.Plan.Reserved }
