package storage

import (
	"context"
	"sync"
	"time"
)

// Faults make a bucket slow or stuck, for tests of back pressure. They act
// below the part queue, where a real backend's latency would be felt. The
// zero value injects nothing.
type Faults struct {
	// Latency is added to every write of a part and to every commit.
	Latency time.Duration
	// BytesPerSecond throttles writes (0 = unlimited).
	BytesPerSecond int64
	// BeforeCommit, when set, is called with an object's key just before
	// the object is committed, and may block. If it returns an error the
	// commit fails with it and nothing is stored. Tests use it to decide
	// when, in which order and whether each upload completes.
	BeforeCommit func(key string) error

	mu    sync.Mutex
	stall chan struct{} // non-nil while stalled
}

// Stall makes every write and commit wait until Resume, or until the
// object's context ends, as a stuck store's request would.
func (f *Faults) Stall() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stall == nil {
		f.stall = make(chan struct{})
	}
}

// Resume ends a stall.
func (f *Faults) Resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stall != nil {
		close(f.stall)
		f.stall = nil
	}
}

func (f *Faults) wait(ctx context.Context, n int) error {
	f.mu.Lock()
	stall := f.stall
	f.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d := f.Latency
	if f.BytesPerSecond > 0 {
		d += time.Duration(int64(n) * int64(time.Second) / f.BytesPerSecond)
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type faultyWriter struct {
	objectWriter
	f   *Faults
	key string
	ctx context.Context // the object's
}

func (w faultyWriter) Write(p []byte) (int, error) {
	if err := w.f.wait(w.ctx, len(p)); err != nil {
		return 0, err
	}
	return w.objectWriter.Write(p)
}

func (w faultyWriter) commit() error {
	if err := w.f.wait(w.ctx, 0); err != nil {
		w.objectWriter.abort()
		return err
	}
	if w.f.BeforeCommit != nil {
		if err := w.f.BeforeCommit(w.key); err != nil {
			// The part queue aborts only on its own errors: drop the
			// object here so that no temp file or upload is left behind.
			w.objectWriter.abort()
			return err
		}
	}
	return w.objectWriter.commit()
}
