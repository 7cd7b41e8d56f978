package runner

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
)

// TestLagWhilePaused: while back pressure pauses fetching (storage stalled,
// the budget full), the topic keeps growing, and /status's lag must grow
// with it: no fetch tells the end offsets then, so the source lists them.
func TestLagWhilePaused(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	rng := rand.New(rand.NewPCG(5, 6))
	gen := func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: randomValue(rng, 2048)}
	}
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Backpressure.MemoryLimit = "64MiB"
	cfg.Format.Compression = "none"
	cfg.File.MaxRecords = 0
	faults := &storage.Faults{}
	progress, stop := startedWith(t, cfg, Options{StorageFaults: faults})
	testkit.Produce(t, cl, "events", 100, gen)
	waitFor(t, "the first records to be written", func() bool {
		p := progress()
		return p != nil && p.Sink().Records > 0
	})

	// Storage stops taking bytes: the records pile up until the budget
	// is full and fetching pauses.
	faults.Stall()
	testkit.Produce(t, cl, "events", 30_000, gen)
	waitFor(t, "fetching to pause while storage is stalled", func() bool { return progress().Source().Paused })
	before := progress().Status().LagRecords

	const more = 5_000
	testkit.Produce(t, cl, "events", more, gen)
	waitFor(t, "the lag to grow by the records produced while paused", func() bool {
		return progress().Status().LagRecords >= before+more
	})
	if !progress().Source().Paused {
		t.Fatal("fetching resumed while storage was stalled: the lag could have grown from a fetch")
	}
	faults.Resume()
	end := testkit.EndOffsets(t, cl, "events")
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}
