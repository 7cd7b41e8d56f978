package sink

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/sink/filewriter"
)

// The queue between the poll side and a file's goroutine (docs/design.md,
// "The write pipeline"). Records are handed over in batches, so that the
// channel and the budget's lock are paid once per batch, not per record. A
// file holds at most Config.QueueBatches batches handed over plus the one
// its goroutine encodes; when they are full, the poll side waits for the
// encoder, which is the back pressure of a file that can't keep up.
const (
	batchRecords = budget.QueueBatchRecs
	batchBytes   = budget.QueueBatchBytes
	// syncRecordBytes: a record this large is not queued. It is encoded
	// while the Write that brought it waits, so it stays counted once, by
	// the caller (see budget.Plan on records larger than the budget's room).
	syncRecordBytes = 4 * batchBytes
)

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
		if err := s.send(ctx, f, filewriter.Batch{Ctx: ctx, Recs: []*kgo.Record{r}, Bytes: n, Done: done}); err != nil {
			return err
		}
		f.queuedIn += n
		// Not bounded by ctx: once it ends, the gate waits no more, and
		// the rest of the record is queued (see package gate).
		<-done
		return nil
	}
	if f.pending == nil {
		f.pending = filewriter.GetRecs()
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
	b := filewriter.Batch{Ctx: ctx, Recs: f.pending, Bytes: f.pendingBytes}
	f.pending, f.pendingBytes = nil, 0
	s.budget.Acquire(budget.QueuedRecords, b.Bytes)
	if err := s.send(ctx, f, b); err != nil {
		s.budget.Release(budget.QueuedRecords, b.Bytes)
		return err
	}
	f.queuedIn += b.Bytes
	return nil
}

// send queues b for f's goroutine, waiting for room until ctx ends.
// router.mu held: the file goroutine never takes it, so waiting on it with
// the lock held can't deadlock.
func (s *Sink) send(ctx context.Context, f *openFile, b filewriter.Batch) error {
	select {
	case f.fw.Queue() <- b:
		return nil
	default:
	}
	select {
	case f.fw.Queue() <- b:
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
	if err := s.send(ctx, f, filewriter.Batch{Ctx: ctx, Done: done}); err != nil {
		return err
	}
	<-done // as for a large record in enqueueLocked
	return nil
}
