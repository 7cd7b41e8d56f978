package budget_test

import (
	"testing"

	"github.com/spillway/spillway/internal/budget"
)

// The plan tells the whole division, and the budget and its users read it
// from there.
func TestPlanDivision(t *testing.T) {
	const mib = int64(1 << 20)
	for _, process := range []int64{64 * mib, 1024 * mib, 3000 * mib, 16 << 30} {
		p, err := budget.NewPlan(process)
		if err != nil {
			t.Fatal(err)
		}
		if p.OpenFiles != p.Data/2 {
			t.Errorf("%dMiB: OpenFiles %d, want half the data budget %d", process>>20, p.OpenFiles, p.Data/2)
		}
		if p.High != p.Data*90/100 || p.Low != p.Data*70/100 {
			t.Errorf("%dMiB: watermarks %d/%d, want 90%%/70%% of %d", process>>20, p.High, p.Low, p.Data)
		}
		if want := min(max(int64(p.FetchMax)/4, mib), int64(p.FetchMax)); int64(p.FetchPartitionMax) != want {
			t.Errorf("%dMiB: FetchPartitionMax %d, want a quarter of a fetch (at least 1MiB, at most the fetch) %d", process>>20, p.FetchPartitionMax, want)
		}
		if p.RecordRoom() != p.Reserved {
			t.Errorf("%dMiB: RecordRoom %d, want the fetch share %d", process>>20, p.RecordRoom(), p.Reserved)
		}
		// The budget derives the same from its limit.
		b := budget.New(p.Data, 0)
		b.Acquire(budget.FileEncoders, p.High)
		if b.Over() {
			t.Errorf("%dMiB: budget over at the plan's high watermark", process>>20)
		}
		b.Acquire(budget.FileEncoders, 1)
		if !b.Over() {
			t.Errorf("%dMiB: budget not over above the plan's high watermark", process>>20)
		}
		if got, want := b.MaxOpenFiles(3*mib), p.MaxOpenFiles(3*mib); got != want || int64(want) != p.OpenFiles/(3*mib) {
			t.Errorf("%dMiB: MaxOpenFiles(3MiB) = %d from the budget, %d from the plan, want %d", process>>20, got, want, p.OpenFiles/(3*mib))
		}
	}
	p, _ := budget.NewPlan(64 << 20)
	if n := p.MaxOpenFiles(1 << 40); n != 1 {
		t.Errorf("MaxOpenFiles of a file larger than the share = %d, want 1", n)
	}
}

// Need is the least the data budget must hold for a storage configuration.
func TestPlanNeed(t *testing.T) {
	p, _ := budget.NewPlan(64 << 20) // data 32MiB, fetch share 8MiB
	if got, want := p.Need(1, 3<<20, 4, 256<<10), int64(8<<20+3<<20+4*256<<10); got != want {
		t.Errorf("Need(local, zstd) = %d, want %d", got, want)
	}
	s3File := int64(3<<20 + 5*8<<20 + 256<<10)
	if need := p.Need(1, s3File, 4, 8<<20); need <= p.Data {
		t.Errorf("Need(S3, 8MiB parts) = %d fits in %d: it must not at 64MiB", need, p.Data)
	}
	limit, ok := budget.SmallestLimit(func(p budget.Plan) bool { return p.Need(1, s3File, 4, 8<<20) <= p.Data })
	if !ok {
		t.Fatal("no limit fits S3 with 8MiB parts")
	}
	fits, _ := budget.NewPlan(limit)
	below, _ := budget.NewPlan(limit - 1<<20)
	if fits.Need(1, s3File, 4, 8<<20) > fits.Data || below.Need(1, s3File, 4, 8<<20) <= below.Data {
		t.Errorf("SmallestLimit = %dMiB is not the smallest that fits", limit>>20)
	}
}

func TestProcessFor(t *testing.T) {
	for _, size := range []int64{1, 8 << 20, 8<<20 + 1, 40 << 20, 500 << 20} {
		limit, ok := budget.ProcessFor(size, 0)
		if !ok {
			t.Fatalf("ProcessFor(%d): no limit", size)
		}
		p, _ := budget.NewPlan(limit)
		if p.RecordRoom() < size {
			t.Errorf("ProcessFor(%d) = %dMiB, whose room is %d", size, limit>>20, p.RecordRoom())
		}
		if limit > budget.MinMemoryLimit {
			if q, _ := budget.NewPlan(limit - 1<<20); q.RecordRoom() >= size {
				t.Errorf("ProcessFor(%d) = %dMiB, but 1MiB less has room too", size, limit>>20)
			}
		}
	}
	if limit, ok := budget.ProcessFor(1<<30, 0); ok {
		t.Errorf("ProcessFor(1GiB) = %dMiB, want none: the fetch share stops growing", limit>>20)
	}
}

// A format that copies a large record while it writes it (parquet, avro)
// needs a limit whose open files' share holds the copies, and a multiple
// over memory_limit that counts them.
func TestProcessForCopies(t *testing.T) {
	const size = 30 << 20
	text, _ := budget.ProcessFor(size, 0)
	limit, ok := budget.ProcessFor(size, 4)
	if !ok {
		t.Fatal("ProcessFor(30MiB, 4 copies): no limit")
	}
	p, _ := budget.NewPlan(limit)
	if p.OpenFiles < 4*size || p.RecordRoom() < size {
		t.Errorf("ProcessFor(30MiB, 4) = %dMiB: open files %d, room %d", limit>>20, p.OpenFiles, p.RecordRoom())
	}
	if q, _ := budget.NewPlan(limit - 1<<20); q.OpenFiles >= 4*size {
		t.Errorf("ProcessFor(30MiB, 4) = %dMiB, but 1MiB less holds the copies too", limit>>20)
	}
	if limit <= text {
		t.Errorf("ProcessFor(30MiB, 4) = %dMiB, not above the text formats' %dMiB", limit>>20, text>>20)
	}
	p.RecordCopies = 4
	if m := p.LargeRecordMultiple(); m != 6 {
		t.Errorf("LargeRecordMultiple with 4 copies = %d, want 6: two records held apart and the copies", m)
	}
}

// Records larger than the fetch share are counted apart: they show, but
// don't count against the limit, so that waiting for room they can't free
// never blocks.
func TestPolledUnreservedCountsApart(t *testing.T) {
	b := budget.New(1000, 0)
	b.Acquire(budget.FetchBuffers, 250)
	b.Acquire(budget.PolledUnreserved, 5000)
	s := b.Snapshot()
	if s.Used != 250 || s.Unreserved != 5000 || s.PeakUnreserved != 5000 || s.Peak != 250 {
		t.Fatalf("snapshot %+v, want used 250 and 5000 apart", s)
	}
	if b.Over() || b.OverLimit() || !b.HasRoom(500) {
		t.Fatalf("Over %v, OverLimit %v, HasRoom(500) %v: bytes apart must not count", b.Over(), b.OverLimit(), b.HasRoom(500))
	}
	if err := b.WaitLow(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if holder(s, budget.PolledUnreserved) != 5000 {
		t.Fatalf("By = %+v, want polled_unreserved 5000", s.By)
	}
	b.Release(budget.PolledUnreserved, 5000)
	if s := b.Snapshot(); s.Unreserved != 0 || s.PeakUnreserved != 5000 {
		t.Fatalf("after release: %+v", s)
	}
	b.Acquire(budget.QueuedChunks, 751)
	if !b.OverLimit() {
		t.Fatal("not OverLimit at 1001 of 1000")
	}
}

func holder(s budget.Snapshot, h budget.Holder) int64 {
	for _, hb := range s.By {
		if hb.Holder == h {
			return hb.Bytes
		}
	}
	return 0
}

// TestSpoolPlan: with a spool, 256MiB holds an open file for each of
// 1,000 partitions, and an encode slot's share is larger than an open
// file's without a spool.
func TestSpoolPlan(t *testing.T) {
	p, err := budget.NewPlan(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.MaxSpooledFiles(); n < 1000 {
		t.Fatalf("MaxSpooledFiles %d in 256MiB, want at least 1000", n)
	}
	if got := budget.New(p.Data, 0).MaxSpooledFiles(); got != p.MaxSpooledFiles() {
		t.Fatalf("Budget.MaxSpooledFiles %d, Plan's %d", got, p.MaxSpooledFiles())
	}
	if s := p.EncodeShare(2); s != p.OpenFiles/4 || s <= p.FileShare(0) {
		t.Fatalf("EncodeShare(2) %d, want a quarter of OpenFiles %d and above FileShare %d", s, p.OpenFiles, p.FileShare(0))
	}
}

// A file's queue is a share of half the data budget among 16 files, from 16
// to 64 batches: the default 1 GiB gets the deep queue that keeps cores
// busy, while at 256 MiB the queues of 16 files stay under the watermark.
func TestQueueBatches(t *testing.T) {
	const mib = int64(1 << 20)
	for _, c := range []struct {
		process int64
		want    int
	}{
		{budget.MinMemoryLimit, budget.MinQueueBatches},
		{256 * mib, 16},
		{512 * mib, 32},
		{budget.DefaultMemoryLimit, 64},
		{16 << 30, 64},
	} {
		p, err := budget.NewPlan(c.process)
		if err != nil {
			t.Fatal(err)
		}
		got := p.QueueBatches()
		if got != c.want {
			t.Errorf("%dMiB: QueueBatches %d, want %d", c.process>>20, got, c.want)
		}
		if queued := 16 * int64(got) * budget.QueueBatchBytes; c.process >= 256*mib && queued > p.Data/2 {
			t.Errorf("%dMiB: 16 full queues hold %d bytes, over half the data budget %d", c.process>>20, queued, p.Data/2)
		}
	}
}
