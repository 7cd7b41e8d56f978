package local

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestSyncDirWaitsForARoundStartedAfterIt: commits share a directory's
// fsync, but a commit that links its file while a round runs must wait for
// the next round, since the running one may have started before its link.
// The fsync is the real one, wrapped to hold each round until the test lets
// it go: no crash can be staged in-process, so the test watches the order
// in which rounds start and callers return instead.
func TestSyncDirWaitsForARoundStartedAfterIt(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 4)
	release := make(chan struct{})
	var rounds atomic.Int32
	l.fsyncDir = func(dir string) error {
		started <- int(rounds.Add(1))
		<-release
		return syncDir(dir)
	}
	dir := l.root
	a := make(chan error, 1)
	go func() { a <- l.syncDir(dir) }()
	if r := <-started; r != 1 {
		t.Fatalf("first round is %d", r)
	}
	// Round 1 runs: B's link came after it started.
	b := make(chan error, 1)
	go func() { b <- l.syncDir(dir) }()
	// C joins the same pending round as B: one fsync for both.
	c := make(chan error, 1)
	go func() { c <- l.syncDir(dir) }()
	waitPending(t, l, dir, 2)
	release <- struct{}{} // round 1 ends
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	const early = "a caller that came while round 1 ran returned before round 2 ended: its link may not be durable"
	select {
	case r := <-started:
		if r != 2 {
			t.Fatalf("second round is %d", r)
		}
	case <-b:
		t.Fatal(early)
	case <-c:
		t.Fatal(early)
	}
	select {
	case <-b:
		t.Fatal(early)
	case <-c:
		t.Fatal(early)
	default:
	}
	release <- struct{}{}
	for _, ch := range []chan error{b, c} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if n := rounds.Load(); n != 2 {
		t.Fatalf("%d fsyncs for three callers, two of them together; want 2", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.syncs) != 0 {
		t.Fatalf("%d directories still have a round: %v", len(l.syncs), l.syncs)
	}
}

// waitPending waits until n callers joined the round of dir that has not
// started.
func waitPending(t *testing.T, l *Dir, dir string, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		d := l.syncs[dir]
		joined := 0
		if d != nil && d.next != nil {
			joined = d.next.joined
		}
		l.mu.Unlock()
		if joined >= n {
			return
		}
		runtime.Gosched()
	}
}
