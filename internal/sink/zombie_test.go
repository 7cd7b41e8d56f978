package sink_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// A partition lost while a file's ledger entry is written and the file not
// yet published resumes, in this process or another, from "entry k, whose
// file was not published". The file's publication was already on its way
// and can't be called back, so it may land after that resume; then the new
// owner's file of the same name collides with it, and the new owner, which
// has written entry k+1 for its own version of the file, stops. A restart
// must resume from what storage holds, not fail for good because the last
// entry's file has another size than the entry says.
// TestPropLateZombiePublish found this.
func TestZombiePublishedAfterResume(t *testing.T) {
	ctx := context.Background()
	// Every commit of the data file t-0-0.jsonl waits for the test.
	arrived := make(chan chan error, 4)
	faults := &storage.Faults{BeforeCommit: func(k string) error {
		if k != key("t", 0, 0) {
			return nil
		}
		ch := make(chan error, 1)
		arrived <- ch
		return <-ch
	}}
	dir := t.TempDir()
	bucket, err := storage.Open(ctx, "file://"+dir, storage.Options{PartSize: 64 << 10, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	cfg := baseConfig(t)
	cfg.MaxRecords = 2
	cfg.MaxAge = time.Hour
	cfg.Ledger = ledger.New(bucket, "")
	s := sink.New(cfg, sink.FromStorage(bucket), budget.New(1<<30, 0), slog.New(slog.DiscardHandler))
	t.Cleanup(s.Close)
	id := ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0}
	tps := map[offsets.TopicPartition]bool{tp("t", 0): true}
	resume := func() (ledger.Point, error) {
		return cfg.Ledger.Resume(ctx, id, ledger.Log{End: 2}, ledger.ResumeOptions{})
	}
	assign := func() ledger.Point {
		t.Helper()
		pt, err := resume()
		if err != nil {
			t.Fatal(err)
		}
		if !pt.Found {
			pt.State = offsets.State{Next: 0}
		}
		s.Assign(tp("t", 0), id, pt)
		return pt
	}

	// The first owner closes record 0 alone in t-0-0.jsonl; its entry 0 is
	// written, its publication waits.
	assign()
	if err := s.Write(ctx, recs("t", 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_ = s.Flush(cancelled, tps, offsets.ReasonAge)
	zombie := <-arrived

	// The partition is lost and assigned again: it resumes before the file.
	s.Drop(tps)
	if pt := assign(); pt.State.Next != 0 || len(pt.State.Above) != 0 {
		t.Fatalf("resumed at %+v, want before entry 0's file", pt.State)
	}
	// The new owner writes [0,2) into its own t-0-0.jsonl: entry 1 is
	// written, its publication waits.
	if err := s.Write(ctx, recs("t", 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	owner := <-arrived

	// The zombie's publication lands first; the new owner's collides.
	zombie <- nil
	deadline := time.Now().Add(time.Minute)
	for {
		if _, ok, err := bucket.Stat(ctx, key("t", 0, 0)); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the zombie's file was never published")
		}
		time.Sleep(time.Millisecond)
	}
	owner <- nil
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := s.Flush(wctx, nil, offsets.ReasonShutdown); err == nil {
		t.Fatal("the new owner published over the zombie's file")
	}

	// A restart resumes from what storage holds: record 0, in the
	// zombie's file.
	pt, err := resume()
	if err != nil {
		t.Fatalf("after a lost partition's file was published late, the partition can't be resumed: %v", err)
	}
	if !pt.State.Handled(0) || pt.State.Handled(1) {
		t.Fatalf("resumed at %+v (%s), but storage holds exactly offset 0", pt.State, pt.From)
	}
}
