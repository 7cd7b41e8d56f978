package sink

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
)

// The queue between the poll side and a file's goroutine (docs/design.md,
// "The write pipeline"). Records are handed over in batches, so that the
// channel and the budget's lock are paid once per batch, not per record. A
// file holds at most fileQueueBatches batches handed over plus the one its
// goroutine encodes; when they are full, the poll side waits for the
// encoder, which is the back pressure of a file that can't keep up.
const (
	batchRecords     = budget.QueueBatchRecs
	batchBytes       = budget.QueueBatchBytes
	fileQueueBatches = budget.QueueBatches
	// syncRecordBytes: a record this large is not queued. It is encoded
	// while the Write that brought it waits, so it stays counted once, by
	// the caller (see budget.Plan on records larger than the budget's room).
	syncRecordBytes = 4 * batchBytes
)

// batch is records handed to a file's goroutine, of bytes in all. Unless
// the sender waits for it (done), its bytes were acquired as
// budget.QueuedRecords and are released once the batch is encoded. ctx is
// the Write's, for the dead-letter topic and the gate's waits.
type batch struct {
	ctx   context.Context
	recs  []*kgo.Record
	bytes int64
	done  chan struct{} // when set, closed once the batch is encoded
}

// recsPool recycles batch slices between file goroutines and the poll side.
var recsPool = sync.Pool{New: func() any { return new([]*kgo.Record) }}

// getRecs and putRecs take a batch slice from the pool and give it back:
// any goroutine.
func getRecs() []*kgo.Record { return (*recsPool.Get().(*[]*kgo.Record))[:0] }

func putRecs(rs []*kgo.Record) {
	clear(rs) // let the records go
	rs = rs[:0]
	recsPool.Put(&rs)
}

// recordBytes is what a record holds in memory, as the source counts it
// when it polls it (source.RecordSize, less the fixed overhead).
func recordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// enqueueLocked adds r to f's pending batch, and hands the batch over
// when it is full. The record itself is held, not copied: kgo's records
// stay valid after the poll.
// router.mu held; it may wait for f's goroutine.
func (s *Sink) enqueueLocked(ctx context.Context, f *openFile, r *kgo.Record) error {
	n := recordBytes(r)
	if n >= syncRecordBytes {
		if err := s.handOverLocked(ctx, f); err != nil {
			return err
		}
		done := make(chan struct{})
		if err := s.send(ctx, f, batch{ctx: ctx, recs: []*kgo.Record{r}, bytes: n, done: done}); err != nil {
			return err
		}
		f.queuedIn += n
		// Not bounded by ctx: once it ends, the gate waits no more, and
		// the rest of the record is queued (see gate).
		<-done
		return nil
	}
	if f.pending == nil {
		f.pending = getRecs()
	}
	f.pending = append(f.pending, r)
	f.pendingBytes += n
	if !f.touched {
		f.touched = true
		s.touched = append(s.touched, f)
	}
	if len(f.pending) >= batchRecords || f.pendingBytes >= batchBytes {
		return s.handOverLocked(ctx, f)
	}
	return nil
}

// handOverLocked hands f's pending batch to its goroutine. Its bytes move
// from the caller's count (the source's polled records) to the sink's.
// router.mu held.
func (s *Sink) handOverLocked(ctx context.Context, f *openFile) error {
	if len(f.pending) == 0 {
		return nil
	}
	b := batch{ctx: ctx, recs: f.pending, bytes: f.pendingBytes}
	f.pending, f.pendingBytes = nil, 0
	s.budget.Acquire(budget.QueuedRecords, b.bytes)
	if err := s.send(ctx, f, b); err != nil {
		s.budget.Release(budget.QueuedRecords, b.bytes)
		return err
	}
	f.queuedIn += b.bytes
	return nil
}

// send queues b for f's goroutine, waiting for room until ctx ends.
// router.mu held: the file goroutine never takes it, so waiting on it with
// the lock held can't deadlock.
func (s *Sink) send(ctx context.Context, f *openFile, b batch) error {
	select {
	case f.q <- b:
		return nil
	default:
	}
	select {
	case f.q <- b:
		return nil
	case <-ctx.Done():
		// The file misses records it was given: it is never published,
		// and nothing waits for it.
		f.lost = true
		err := fmt.Errorf("write %s: %w", f.key, ctx.Err())
		s.fail(err)
		s.tracker.Fail(err)
		return err
	}
}

// handOverTouchedLocked hands over the pending batches of the files the
// current Write gave records to, so that they encode while the caller
// polls again.
// router.mu held.
func (s *Sink) handOverTouchedLocked(ctx context.Context) error {
	var first error
	for _, f := range s.touched {
		f.touched = false
		if _, open := s.files[f.id]; !open {
			continue // closed or dropped: nothing pending
		}
		if err := s.handOverLocked(ctx, f); err != nil && first == nil {
			first = err
		}
	}
	clear(s.touched)
	s.touched = s.touched[:0]
	return first
}

// drainLocked waits until f's goroutine has encoded every record handed
// to f so far.
// router.mu held.
func (s *Sink) drainLocked(ctx context.Context, f *openFile) error {
	if err := s.handOverLocked(ctx, f); err != nil {
		return err
	}
	done := make(chan struct{})
	if err := s.send(ctx, f, batch{ctx: ctx, done: done}); err != nil {
		return err
	}
	<-done // as for a large record in enqueueLocked
	return nil
}
