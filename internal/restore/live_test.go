package restore

import (
	"errors"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// TestLivePartitions reads each partition's progress while a restore runs
// and after: inside a transaction the partitions it wrote are "open" and
// nothing of them counts as done; a restore that resumes shows the source
// range from its progress on; at the end each partition's records, bytes
// and next offset are what it restored, and the rows add up to the totals.
func TestLivePartitions(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1)
	f := newSource(t, cluster, "src-live", 2, 194, func(c *config.Config) { c.Format.Type = "jsonl" })
	createTopic(t, f.cl, "dst-live", 2)

	// First run: stopped at the 150th record produced, within its
	// transaction (TxnBytes is large: one transaction).
	live := &Live{}
	var mid []PartitionStats
	_, err := f.restoreTo(t, "dst-live", Options{Live: live, AfterProduce: func(n int64) error {
		if n == 150 {
			mid = live.Partitions()
			return errKilled
		}
		return nil
	}})
	if !errors.Is(err, errKilled) {
		t.Fatalf("restore stopped at 150: %v", err)
	}
	if len(mid) != 2 {
		t.Fatalf("mid-restore: %d partitions, want 2: %+v", len(mid), mid)
	}
	open := 0
	for _, p := range mid {
		if p.Topic != "src-live" || p.To != "dst-live" || p.From != 0 || p.End != 194 || p.Planned != 194 {
			t.Errorf("mid-restore partition %d: %+v; want src-live → dst-live, offsets 0-194, 194 planned", p.Partition, p)
		}
		if p.Committed != 0 || p.Next != 0 || p.Done {
			t.Errorf("mid-restore partition %d: committed %d, next %d, done %v, before any commit", p.Partition, p.Committed, p.Next, p.Done)
		}
		if p.Txn == TxnOpen {
			open++
		}
	}
	if open == 0 {
		t.Errorf("mid-transaction, no partition is in an open transaction: %+v", mid)
	}

	// Second run, with commits of about 2 KiB: from 0 again (nothing was
	// committed), then resumed by a third run after the first commits.
	live = &Live{}
	_, err = f.restoreTo(t, "dst-live", Options{Live: live, TxnBytes: 2 << 10, AfterProduce: func(n int64) error {
		if n == 250 {
			return errKilled
		}
		return nil
	}})
	if !errors.Is(err, errKilled) {
		t.Fatalf("restore stopped at 250: %v", err)
	}
	live = &Live{}
	res, err := f.restoreTo(t, "dst-live", Options{Live: live, TxnBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var recs, bytes, skipped int64
	resumedMid := 0
	for _, p := range live.Partitions() {
		from := res.Resumed["dst-live"][p.Partition]
		if from == 0 {
			t.Errorf("partition %d resumed from 0: the killed run committed nothing of it", p.Partition)
		}
		want := PartitionStats{Topic: "src-live", Partition: p.Partition, To: "dst-live", From: from, End: 194, Next: 194,
			Planned: p.Planned, Read: p.Read, Skipped: p.Skipped, Committed: 194 - from, Bytes: p.Bytes, Txn: TxnNone, Done: true}
		if from < 194 {
			resumedMid++
		}
		if p.Read > 0 && p.Rate <= 0 {
			t.Errorf("partition %d: rate %v after reading %d records", p.Partition, p.Rate, p.Read)
		}
		p.Rate, p.ETA = 0, 0
		if p != want || p.Read != p.Skipped+p.Committed || p.Planned < p.Committed {
			t.Errorf("partition %d at the end:\n got %+v\nwant %+v (read = skipped + committed)", p.Partition, p, want)
		}
		recs, bytes, skipped = recs+p.Committed, bytes+p.Bytes, skipped+p.Skipped
	}
	if resumedMid == 0 {
		t.Error("no partition resumed mid-way: the third run restored nothing")
	}
	if s := live.Stats(); recs != s.Committed || bytes != s.CommittedBytes || skipped != s.Skipped || recs != res.Records {
		t.Errorf("the partitions add up to %d records, %d bytes, %d skipped; the totals are %+v, the result %d records", recs, bytes, skipped, s, res.Records)
	}
	compare(t, f.want, readCommitted(t, cluster, "dst-live", 2))
}
