package source

import (
	"context"
	"sync"
	"testing"
	"time"
)

// signal stands in for offsets.Tracker's wake-up: a channel closed and
// replaced each time something becomes durable.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) durable() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

// TestDurableDuringATurnWakesTheNext: a file that becomes durable while a
// commit is in flight gets its own commit without a tick (the tick channel
// here fires once, for the first turn). Taking the wake-up after the turn lost that signal,
// and the run's last files waited for the 5 s ticker.
func TestDurableDuringATurnWakesTheNext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := &signal{ch: make(chan struct{})}
	turns := make(chan int, 3)
	n := 0
	tick := make(chan time.Time, 1)
	tick <- time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		onDurable(ctx, sig.durable, tick, func() bool {
			n++
			if n == 1 {
				sig.fire() // durable while this turn commits
			}
			turns <- n
			return n < 2
		})
	}()
	for want := 1; want <= 2; want++ {
		select {
		case got := <-turns:
			if got != want {
				t.Fatalf("turn %d, want %d", got, want)
			}
		case <-time.After(time.Minute): // only a bound on a hang: no second tick exists
			t.Fatalf("turn %d never ran: the wake-up during turn 1 was lost", want)
		}
	}
	<-done
}
