// Package partqueue decouples an object's writer from storage latency: a
// Queue copies what it is given into parts and hands them, in order, to
// the object's destination from a goroutine of its own, so that the
// encoder goes on while storage takes them. Every part is reported to the
// byte budget's account while it is held, and a semaphore shared by the
// bucket's queues bounds the parts handed to storage at once.
package partqueue

import (
	"context"
	"io"
	"sync"
)

// Dst is where a queue's parts go: one object being written. Write may
// block on the store and does not keep p; after a Write error only Abort
// is called. Commit completes the object, Abort drops it; one of them is
// called once, from the goroutine that calls the queue's Commit or Abort.
type Dst interface {
	io.Writer
	Commit() error
	Abort()
}

// NoPartCommitter is a Dst whose Commit sends no part (a local file's):
// it need not wait for one of the upload slots, which bound the part
// buffers handed to storage at once.
type NoPartCommitter interface {
	CommitHoldsNoPart()
}

// Queue decouples the encoder from storage latency. Write copies bytes
// into a part buffer; full parts go to a per-object goroutine that hands them
// to the backend while the encoder goes on. Every part buffer is reported to
// account, so the byte budget sees exactly the bytes waiting for
// storage, and the bucket-wide semaphore bounds how many parts are being
// handed to storage at once (storage.upload_concurrency).
//
// Write never waits for storage: the queue is bounded by the byte budget,
// which pauses fetching when storage falls behind, not by a fixed depth that
// would stall every partition behind one slow object. The one exception is
// asked for by the caller, with WaitQueued: a record larger than the
// budget's room is handed over piece by piece.
type Queue struct {
	dst      Dst
	partSize int
	uploads  chan struct{} // bucket-wide semaphore
	account  func(int64)
	pool     *sync.Pool

	cur []byte

	mu      sync.Mutex
	cond    *sync.Cond
	queued  [][]byte
	closed  bool  // no more parts
	aborted bool  // drop what is queued
	err     error // first backend error
	running bool
	done    chan struct{}
	// held counts the bytes of full parts queued or being handed to
	// storage; taken is closed and replaced whenever it drops.
	held  int
	taken chan struct{}
}

// New returns the queue of one object, whose parts of partSize bytes go to
// dst. uploads is the bucket-wide semaphore; account is told of every part
// buffer allocated (+partSize) and freed (-partSize); pool recycles part
// buffers across the bucket's queues.
func New(dst Dst, partSize int, uploads chan struct{}, account func(int64), pool *sync.Pool) *Queue {
	p := &Queue{dst: dst, partSize: partSize, uploads: uploads, account: account, pool: pool,
		done: make(chan struct{}), taken: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *Queue) run() {
	defer close(p.done)
	for {
		p.mu.Lock()
		for len(p.queued) == 0 && !p.closed {
			p.cond.Wait()
		}
		if len(p.queued) == 0 {
			p.signalTakenLocked()
			p.mu.Unlock()
			return
		}
		part := p.queued[0]
		p.queued = p.queued[1:]
		skip := p.err != nil || p.aborted
		p.mu.Unlock()
		if !skip {
			p.uploads <- struct{}{}
			_, err := p.dst.Write(part)
			<-p.uploads
			if err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
			}
		}
		p.free(part)
		p.mu.Lock()
		p.held -= len(part)
		p.signalTakenLocked()
		p.mu.Unlock()
	}
}

func (p *Queue) signalTakenLocked() {
	close(p.taken)
	p.taken = make(chan struct{})
}

// WaitQueued blocks until at most max bytes of full parts are queued or
// being handed to storage, or the queue failed, or ctx ends.
func (p *Queue) WaitQueued(ctx context.Context, max int) error {
	p.mu.Lock()
	for p.held > max && p.err == nil && !p.closed {
		taken := p.taken
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-taken:
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

func (p *Queue) alloc() []byte {
	p.account(int64(p.partSize))
	if b, ok := p.pool.Get().(*[]byte); ok && cap(*b) == p.partSize {
		return (*b)[:0]
	}
	return make([]byte, 0, p.partSize)
}

func (p *Queue) free(b []byte) {
	p.account(-int64(p.partSize))
	p.pool.Put(&b)
}

func (p *Queue) push(part []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		p.free(part)
		return p.err
	}
	if !p.running {
		p.running = true
		go p.run()
	}
	p.queued = append(p.queued, part)
	p.held += len(part)
	p.cond.Signal()
	return nil
}

// Write copies b into parts and queues the full ones. It never waits for
// storage; it fails with the first error storage returned.
func (p *Queue) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		if p.cur == nil {
			p.cur = p.alloc()
		}
		c := copy(p.cur[len(p.cur):cap(p.cur)], b)
		p.cur = p.cur[:len(p.cur)+c]
		b = b[c:]
		n += c
		if len(p.cur) == cap(p.cur) {
			part := p.cur
			p.cur = nil
			if err := p.push(part); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// finish closes the queue and waits for the goroutine, if any.
func (p *Queue) finish(abort bool) error {
	p.mu.Lock()
	p.closed = true
	p.aborted = abort
	running := p.running
	p.cond.Signal()
	p.mu.Unlock()
	if running {
		<-p.done
	}
	return p.err
}

// Commit sends the last part, waits for the queue to drain, then completes
// the object.
func (p *Queue) Commit() error {
	if p.cur != nil {
		part := p.cur
		p.cur = nil
		if err := p.push(part); err != nil {
			_ = p.finish(true)
			p.dst.Abort()
			return err
		}
	}
	if err := p.finish(false); err != nil {
		p.dst.Abort()
		return err
	}
	// Completing an upload sends its last part: it takes a slot too,
	// unless the backend's commit sends none (a local file's).
	if _, ok := p.dst.(NoPartCommitter); !ok {
		p.uploads <- struct{}{}
		defer func() { <-p.uploads }()
	}
	return p.dst.Commit()
}

// Abort drops the object and what is queued for it.
func (p *Queue) Abort() {
	if p.cur != nil {
		p.free(p.cur)
		p.cur = nil
	}
	_ = p.finish(true)
	p.dst.Abort()
}
