package restore

import (
	"errors"
	"sync"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// TestKilledTwiceThenToTheEnd stops a restore mid-transaction twice, as a
// crash would (nothing flushed, committed or aborted), then runs it to the
// end: a read_committed consumer finds every record exactly once, in
// order, and each run went on from the progress the last one committed.
func TestKilledTwiceThenToTheEnd(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1)
	f := newSource(t, cluster, "src-kill", 2, 291, func(c *config.Config) { c.Format.Type, c.Format.Compression = "jsonl", "snappy" })
	createTopic(t, f.cl, "dst-kill", 2)
	small := int64(2 << 10) // many transactions, so the kills fall between commits too
	var resumedFrom []int64
	for _, killAt := range []int64{150, 201} {
		res, err := f.restoreTo(t, "dst-kill", Options{TxnBytes: small, AfterProduce: func(n int64) error {
			if n == killAt {
				return errKilled
			}
			return nil
		}})
		if !errors.Is(err, errKilled) {
			t.Fatalf("restore killed at %d: %v", killAt, err)
		}
		if res.Txns == 0 {
			t.Fatalf("restore killed at %d committed no transaction before it", killAt)
		}
		resumedFrom = append(resumedFrom, res.Resumed["dst-kill"][0]+res.Resumed["dst-kill"][1])
	}
	res, err := f.restoreTo(t, "dst-kill", Options{TxnBytes: small})
	if err != nil {
		t.Fatal(err)
	}
	resumedFrom = append(resumedFrom, res.Resumed["dst-kill"][0]+res.Resumed["dst-kill"][1])
	if resumedFrom[0] != 0 || resumedFrom[1] == 0 || resumedFrom[2] <= resumedFrom[1] {
		t.Errorf("progress at the three starts: %v; want 0, then growing", resumedFrom)
	}
	if res.Records+resumedFrom[2] != 582 {
		t.Errorf("the last run restored %d records from progress %d; want the rest of 582", res.Records, resumedFrom[2])
	}
	compare(t, f.want, readCommitted(t, cluster, "dst-kill", 2))

	// Run again: everything is restored, so nothing is produced.
	res, err = f.restoreTo(t, "dst-kill", Options{})
	if err != nil || res.Records != 0 {
		t.Errorf("a restore after the end produced %d records (%v), want 0", res.Records, err)
	}
}

// TestTwoRestoresAtOnce starts a second restore into the same DST while
// the first is inside a transaction: the second fences the first (same
// transactional id), which stops with a FencedError, and the second
// restores the rest: every record once.
func TestTwoRestoresAtOnce(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1)
	f := newSource(t, cluster, "src-two", 2, 291, func(c *config.Config) { c.Format.Type, c.Format.Compression = "avro", "zstd" })
	createTopic(t, f.cl, "dst-two", 2)
	small := int64(2 << 10) // the first commits some transactions before it is fenced

	var wg sync.WaitGroup
	second := make(chan struct{})
	var secondRes Result
	var secondErr error
	firstRes, firstErr := f.restoreTo(t, "dst-two", Options{TxnBytes: small, AfterProduce: func(n int64) error {
		if n == 120 {
			// Mid-transaction: the second restore starts, inits its
			// producer id (fencing this one) and runs to the end before
			// this one produces again.
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(second)
				secondRes, secondErr = f.restoreTo(t, "dst-two", Options{TxnBytes: small})
			}()
			<-second
		}
		return nil
	}})
	wg.Wait()
	if secondErr != nil {
		t.Fatalf("second restore: %v", secondErr)
	}
	var fe *FencedError
	if !errors.As(firstErr, &fe) {
		t.Fatalf("first restore: %v (restored %d), want a FencedError", firstErr, firstRes.Records)
	}
	if firstRes.Records == 0 {
		t.Error("the first restore committed nothing before it was fenced: not a test of continuing from its progress")
	}
	if got := firstRes.Records + secondRes.Records; got != 582 {
		t.Errorf("the two restores committed %d + %d records, want 582 in all", firstRes.Records, secondRes.Records)
	}
	compare(t, f.want, readCommitted(t, cluster, "dst-two", 2))
}
