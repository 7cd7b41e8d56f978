package source_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/testkit"
)

// randomValue is incompressible enough that compression doesn't hide bytes.
func randomValue(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return fmt.Appendf(b[:0], `{"v":"%s"}`, b[:n-8])
}

// smallBudget is a fetch plan divided as budget.NewPlan divides a memory
// limit, of 8MiB, below the 64MiB NewPlan allows: the tests fill the
// budget by producing records, and a small one fills in a fraction of the
// time. The budget holds the fetch share from the start, as the runner's
// (pipeline.go).
func smallBudget() (budget.Plan, *budget.Budget) {
	const data = 4 << 20
	const fetch = data / 4 / 2 / 4 // Data / fetchShare / concurrentFetches / decompression
	plan := budget.Plan{Process: 2 * data, Data: data, Fetches: 2, FetchMax: fetch, FetchPartitionMax: fetch, Reserved: 2 * fetch * 4}
	b := budget.New(plan.Data, 0)
	b.Acquire(budget.FetchBuffers, plan.Reserved)
	return plan, b
}

// handoverBound is the most the accountant may read: the budget, plus one
// poll counted twice while the Write that hands it on runs (see the
// runner's handoverBound).
func handoverBound(plan budget.Plan, b *budget.Budget) int64 { return b.Limit() + plan.Reserved }

// TestStorageStallPausesFetching stalls storage for seconds: fetching must
// pause, resume when storage comes back, and lose nothing.
func TestStorageStallPausesFetching(t *testing.T) {
	t.Parallel()
	topic := shared.Topic(t, 8)
	cl := shared.Client(t)
	rng := rand.New(rand.NewPCG(3, 4))
	gen := func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 8), Value: randomValue(rng, 2048)}
	}
	testkit.Produce(t, cl, topic, 100, gen)
	k := kafkaFor(shared, topic)
	plan, b := smallBudget()
	w := newMemWriter(b, 50)
	r := start(t, k, plan, w, b, discardLog())
	waitFor(t, "the first records to be written", func() bool { return w.Written() > 0 })

	w.Stall()
	// Past the budget: 2KiB records, more than it holds.
	testkit.Produce(t, cl, topic, int(plan.Data/2048)+1000, gen)
	waitFor(t, "fetching to pause while storage is stalled", func() bool { return r.src.Stats().Paused })
	writtenWhilePaused := w.Written()
	// One member holds all 8 partitions, and back pressure pauses them all.
	if n := len(r.src.Health().Assigned); n != 8 {
		t.Errorf("while paused, %d partitions assigned, want all 8 paused", n)
	}
	time.Sleep(3 * time.Second) // the stall itself: storage stays down this long
	if !r.src.Stats().Paused || w.Written() != writtenWhilePaused {
		t.Errorf("while storage was stalled: paused=%v, records written went %d -> %d", r.src.Stats().Paused, writtenWhilePaused, w.Written())
	}
	if snap := b.Snapshot(); snap.Peak > handoverBound(plan, b) {
		t.Errorf("accountant peak %d exceeds the budget %d plus one poll counted twice at the handover, during the stall", snap.Peak, snap.Limit)
	}
	w.Resume()

	end := testkit.EndOffsets(t, cl, topic)
	waitFor(t, "fetching to resume after storage came back", func() bool { return !r.src.Stats().Paused })
	stopAtEnd(t, r, w, cl, k.Group, topic, end)
	testkit.AssertExactlyOnce(t, w.Stored(), topic, end)
}

// TestLagWhilePaused: while back pressure pauses fetching (storage stalled,
// the budget full), the topic keeps growing, and the end offsets that lag
// is reckoned from (Stats.HighWatermarks; /status's lag_records is their
// distance from the commits) must grow with it: no fetch tells the end
// offsets then, so the source lists them.
func TestLagWhilePaused(t *testing.T) {
	t.Parallel()
	topic := shared.Topic(t, 2)
	cl := shared.Client(t)
	rng := rand.New(rand.NewPCG(5, 6))
	gen := func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: randomValue(rng, 2048)}
	}
	k := kafkaFor(shared, topic)
	plan, b := smallBudget()
	w := newMemWriter(b, 50)
	r := start(t, k, plan, w, b, discardLog())
	testkit.Produce(t, cl, topic, 100, gen)
	waitFor(t, "the first records to be written", func() bool { return w.Written() > 0 })

	// Storage stops taking bytes: the records pile up until the budget
	// is full and fetching pauses.
	w.Stall()
	testkit.Produce(t, cl, topic, int(plan.Data/2048)+1000, gen)
	waitFor(t, "fetching to pause while storage is stalled", func() bool { return r.src.Stats().Paused })
	ends := func() (n int64) {
		for tp, hw := range r.src.Stats().HighWatermarks {
			if tp.Topic == topic {
				n += hw
			}
		}
		return n
	}
	before := ends()

	const more = 1_000
	testkit.Produce(t, cl, topic, more, gen)
	waitFor(t, "the end offsets to grow by the records produced while paused", func() bool {
		return ends() >= before+more
	})
	if !r.src.Stats().Paused {
		t.Fatal("fetching resumed while storage was stalled: the end offsets could have grown from a fetch")
	}
	w.Resume()
	end := testkit.EndOffsets(t, cl, topic)
	stopAtEnd(t, r, w, cl, k.Group, topic, end)
}
