package spooling

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The estimate starts at the record bytes, takes a seed only above 1, and
// then follows the stored files.
func TestEstimate(t *testing.T) {
	t.Parallel()
	s := New(1, quiet())
	if got := s.Estimate(100); got != 100 {
		t.Fatalf("first estimate %d, want 100", got)
	}
	if !s.Sample() || s.Sample() {
		t.Fatal("Sample must say yes exactly once")
	}
	s.Seed(0.5)
	if got := s.Estimate(100); got != 100 {
		t.Fatalf("a seed below 1 was taken: %d", got)
	}
	s.Seed(1.5)
	if got := s.Estimate(100); got != 150 {
		t.Fatalf("seeded estimate %d, want 150", got)
	}
	s.Learn(1000, 250)
	s.Learn(1000, 750)
	if got := s.Estimate(100); got != 50 {
		t.Fatalf("learned estimate %d, want 50", got)
	}
}

// A fault is counted each time, and its advice names the cause.
func TestFaults(t *testing.T) {
	t.Parallel()
	s := New(1, quiet())
	s.Fault("k", syscall.ENOSPC)
	s.Fault("k", syscall.ENOSPC)
	s.Works()
	if s.Faults() != 2 {
		t.Fatalf("faults %d, want 2", s.Faults())
	}
	for err, want := range map[error]string{
		syscall.ENOSPC:      "is full",
		fs.ErrPermission:    "can't be written",
		syscall.ENOTDIR:     "is not a directory",
		fs.ErrNotExist:      "was removed",
		io.ErrUnexpectedEOF: "Check backpressure.spool_dir",
	} {
		if got := fix(err); !strings.Contains(got, want) {
			t.Errorf("fix(%v) = %q, want it to say %q", err, got, want)
		}
	}
}

// A slot is taken until freed; with none free, a stop ends the wait.
func TestSlots(t *testing.T) {
	t.Parallel()
	s := New(1, quiet())
	if !s.TakeSlot(context.Background()) {
		t.Fatal("no slot free in a new state")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s.TakeSlot(ctx) {
		t.Fatal("took a second slot of one")
	}
	s.FreeSlot()
	if !s.TakeSlot(context.Background()) {
		t.Fatal("a freed slot can't be taken")
	}
}

type fakeBudget struct {
	room   bool
	woken  int
	during func() // called in WaitRoom
}

func (b *fakeBudget) HasRoom(int64) bool { return b.room }
func (b *fakeBudget) WaitRoom(ctx context.Context, _ int64, proceed func() bool) error {
	if b.during != nil {
		b.during()
	}
	if b.room || proceed() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}
func (b *fakeBudget) Wake() { b.woken++ }

// A file alone in the slots goes direct without room: waiting would free
// nothing. Once one is active, the next waits for room, and counts as
// waiting meanwhile; the last to end wakes the budget.
func TestWaitRoom(t *testing.T) {
	t.Parallel()
	s := New(2, quiet())
	b := &fakeBudget{}
	if err := s.WaitRoom(context.Background(), b, 10); err != nil {
		t.Fatalf("the only file waits: %v", err)
	}
	var waiting int64
	b.during = func() { waiting = s.Waiting() }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitRoom(ctx, b, 10); err == nil {
		t.Fatal("a second file went direct without room")
	}
	if waiting != 1 || s.Waiting() != 0 {
		t.Fatalf("waiting %d during the wait and %d after, want 1 and 0", waiting, s.Waiting())
	}
	s.Inactive(b)
	if b.woken != 1 {
		t.Fatalf("woken %d times, want 1", b.woken)
	}
}
