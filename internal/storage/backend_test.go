package storage

import (
	"context"
	"errors"
	"io"
	"testing"
)

// seamBackend records what Bucket asks of it. Its embedded backend is nil:
// calling any method it doesn't define panics, which shows in the test.
type seamBackend struct {
	backend
	preflights, removes int
	prefix              string
}

func (s *seamBackend) preflight(_ context.Context, prefix string, rep *PreflightReport) error {
	s.preflights++
	s.prefix = prefix
	rep.Leftover = errLeftover
	return nil
}

func (s *seamBackend) removeAbandoned(_ context.Context, prefix string, belongs func(string) bool) error {
	s.removes++
	s.prefix = prefix
	if !belongs("raw/t-0-0.jsonl") {
		return errors.New("belongs was not passed on")
	}
	return nil
}

var errLeftover = errors.New("probe left over")

// TestBucketGoesThroughBackend: Preflight and RemoveAbandoned reach any
// backend through the interface. They once switched on the concrete type
// (*local, *remote), so a third backend would have been skipped silently.
func TestBucketGoesThroughBackend(t *testing.T) {
	be := &seamBackend{}
	b := &Bucket{be: be, url: "seam://"}
	rep, err := b.Preflight(context.Background(), "raw/")
	if err != nil || !errors.Is(rep.Leftover, errLeftover) || be.preflights != 1 || be.prefix != "raw/" {
		t.Errorf("Preflight: report %+v, err %v; backend asked %d times under %q", rep, err, be.preflights, be.prefix)
	}
	err = b.RemoveAbandoned(context.Background(), "raw/t-0-", func(string) bool { return true })
	if err != nil || be.removes != 1 || be.prefix != "raw/t-0-" {
		t.Errorf("RemoveAbandoned: err %v; backend asked %d times under %q", err, be.removes, be.prefix)
	}
}

// TestRemoteRemoveAbandonedIsNoOp: a remote bucket has nothing to remove,
// and says so without touching the store.
func TestRemoteRemoveAbandonedIsNoOp(t *testing.T) {
	b, err := Open(context.Background(), "mem://", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter(context.Background(), "raw/t-0-0.jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "x"); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveAbandoned(context.Background(), "raw/", func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.List(context.Background(), "raw/", func(Object) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("after RemoveAbandoned: %d objects (err %v), want the committed one", n, err)
	}
}
