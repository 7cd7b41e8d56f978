package storage

import (
	"sync"
	"time"
)

// Faults make a bucket slow or stuck, for tests of back pressure and for
// `spillway bench`. They act below the part queue, where a real backend's
// latency would be felt. The zero value injects nothing.
type Faults struct {
	// Latency is added to every write of a part and to every commit.
	Latency time.Duration
	// BytesPerSecond throttles writes (0 = unlimited).
	BytesPerSecond int64

	mu    sync.Mutex
	stall chan struct{} // non-nil while stalled
}

// Stall makes every write and commit wait until Resume.
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

func (f *Faults) wait(n int) {
	f.mu.Lock()
	stall := f.stall
	f.mu.Unlock()
	if stall != nil {
		<-stall
	}
	d := f.Latency
	if f.BytesPerSecond > 0 {
		d += time.Duration(int64(n) * int64(time.Second) / f.BytesPerSecond)
	}
	if d > 0 {
		time.Sleep(d)
	}
}

type faultyWriter struct {
	objectWriter
	f *Faults
}

func (w faultyWriter) Write(p []byte) (int, error) {
	w.f.wait(len(p))
	return w.objectWriter.Write(p)
}

func (w faultyWriter) commit() error {
	w.f.wait(0)
	return w.objectWriter.commit()
}
