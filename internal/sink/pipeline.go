package sink

import (
	"context"
	"errors"
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

// size estimates what f will be once every record handed to it is
// encoded: what its goroutine wrote, plus what is still queued at the
// ratio of bytes out to bytes in seen so far. Compression makes the file's
// own count lag; the estimate keeps a MaxBytes rotation from waiting for
// the encoder.
func (f *openFile) size() int64 {
	w, c := f.written.Load(), f.consumed.Load()
	behind := f.queuedIn + f.pendingBytes - c
	if behind <= 0 {
		return w
	}
	if c == 0 {
		return w + behind
	}
	return w + int64(float64(behind)*float64(w)/float64(c))
}

// sizeLocked is f's size for a MaxBytes rotation: the estimate while it
// is well below max and, near max, what the file's goroutine wrote once it
// has caught up, so that a file rotates at the same record as if it were
// encoded on the spot. Near max is within slack, an eighth of the file and
// at most one batch. There the poll side doesn't wait for the encoder at
// every record: after each exact reading it queues records without waiting
// until, at the file's ratio so far, they may fill half the room left. The
// waits come closer as the file nears max, some log2(slack / record size)
// of them per file instead of one per record of the slack (docs/design.md,
// "The write pipeline"). A file then passes max by its last record, as
// before, unless those queued since the last reading took more than twice
// the room the ratio gave them. The ratio is the file's own: while its
// goroutine has encoded nothing, it is read once a quarter of max is
// queued.
func (s *Sink) sizeLocked(ctx context.Context, f *openFile, max int64) (int64, error) {
	if f.spooled && !f.direct.Load() {
		// Nothing is encoded before it closes: see spooling.estimate.
		return s.spooling.estimate(f.queuedIn + f.pendingBytes), nil
	}
	slack := min(max/8, batchBytes)
	// Until the goroutine has encoded anything, the estimate's ratio is a
	// guess (1): the envelope alone takes jsonl to 1.7 times its input.
	// Once a quarter of the file rides on the guess, read the ratio.
	guess := f.consumed.Load() == 0 && f.queuedIn+f.pendingBytes >= max/4
	if est := f.size(); est < max-slack && !guess {
		return est, nil
	}
	if f.exactIn > 0 {
		since := f.queuedIn + f.pendingBytes - f.exactIn
		if est := int64(float64(since) * f.exactRatio); est < (max-f.exact)/2 {
			return f.exact + est, nil
		}
	}
	if err := s.drainLocked(ctx, f); err != nil {
		return 0, err
	}
	s.sizeWaits++
	// Every byte handed over is encoded: the ratio is the file's own.
	f.exact, f.exactIn = f.written.Load(), f.queuedIn
	f.exactRatio = 1
	if c := f.consumed.Load(); c > 0 {
		f.exactRatio = float64(f.exact) / float64(c)
	}
	return f.exact, nil
}

// drainLocked waits until f's goroutine has encoded every record handed
// to f so far.
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

// run is a file's goroutine: it encodes the batches handed to it, then
// finishes and uploads the file, or abandons it if the file was dropped.
// A spooled file's goroutine is runSpooled.
func (s *Sink) run(f *openFile) {
	defer s.running.Done()
	if f.spooled {
		s.runSpooled(f)
		return
	}
	if err := s.open(f, false); err != nil {
		// Its records were routed to it: the file must never be
		// published, and the sink stops.
		s.fileFailed(f, err)
	}
	for b := range f.q {
		s.encode(f, b)
	}
	if f.abandon.Load() {
		s.abandoned(f)
		close(f.finished)
		return
	}
	err := s.finish(f)
	if err == nil {
		s.keepChain(f)
	}
	f.enc, f.comp = nil, nil // kept or let go: no longer this file's
	close(f.finished)
	s.upload(f, err)
}

// fileFailed records f's first error, after which it encodes no more and
// is never published, and stops the sink: Write and Flush return it.
func (s *Sink) fileFailed(f *openFile, err error) {
	if f.err == nil {
		f.err = err
	}
	s.fail(err)
	s.tracker.Fail(err)
}

// chargeChain counts f's encoder and storage writer in the budget.
func (s *Sink) chargeChain(f *openFile) {
	f.charged = true
	s.budget.Acquire(budget.FileEncoders, s.cfg.CompressorMemory)
	s.budget.Acquire(budget.WriterBuffers, s.bucket.WriterMemory())
}

// abandoned throws away a dropped file's chain and its memory.
func (s *Sink) abandoned(f *openFile) {
	f.discard()
	if f.charged {
		s.budget.Release(budget.FileEncoders, s.cfg.CompressorMemory)
		s.budget.Release(budget.WriterBuffers, s.bucket.WriterMemory())
	}
}

// open starts f's storage writer and its encoder chain; slot: f encodes
// in an encode slot (a spooled file closed), with its larger blocks or
// row groups.
func (s *Sink) open(f *openFile, slot bool) error {
	w, err := s.bucket.NewWriter(s.ctx, f.key, map[string]string{
		"spillway-topic":        f.tp.Topic,
		"spillway-partition":    fmt.Sprint(f.tp.Partition),
		"spillway-start-offset": fmt.Sprint(f.start),
	})
	if err != nil {
		return err
	}
	g := &gate{w: w, b: s.budget}
	if enc, comp, ok := s.reuseChain(g, f.schemas); ok {
		f.w, f.gate, f.comp, f.enc = w, g, comp, enc
		return nil
	}
	comp, err := s.cfg.NewCompressor(g)
	if err != nil {
		w.Abort()
		return err
	}
	enc, err := s.newEncoder(f, comp, slot)
	if err != nil {
		_ = comp.Close()
		w.Abort()
		return err
	}
	f.w, f.gate, f.comp, f.enc = w, g, comp, enc
	return nil
}

// discard throws away what of f's chain was opened.
func (f *openFile) discard() {
	if f.w == nil {
		return
	}
	f.gate.ctx = nil // nothing waits: the file is thrown away
	_ = f.enc.Close()
	_ = f.comp.Close()
	f.w.Abort()
}

// awaitFinishingLocked waits until the files closed so far have been
// finished by their goroutines, which then release their encoders' memory
// (but not what storage has yet to take), or until ctx ends.
func (s *Sink) awaitFinishingLocked(ctx context.Context) {
	for _, f := range s.finishing {
		select {
		case <-f.finished:
		case <-ctx.Done():
			return
		}
	}
	clear(s.finishing)
	s.finishing = s.finishing[:0]
}

// addFinishingLocked notes a closed file whose goroutine has yet to finish
// it, and forgets those that are finished.
func (s *Sink) addFinishingLocked(f *openFile) {
	kept := s.finishing[:0]
	for _, g := range s.finishing {
		select {
		case <-g.finished:
		default:
			kept = append(kept, g)
		}
	}
	clear(s.finishing[len(kept):])
	s.finishing = append(kept, f)
}

// encode writes one batch into f. A record the format refuses goes to the
// error policy; any other error is the file's, and stops the sink.
func (s *Sink) encode(f *openFile, b batch) {
	defer s.batchDone(f, b)
	if f.err != nil || f.abandon.Load() {
		return
	}
	s.encodeRecs(f, b.ctx, b.recs)
}

// batchDone accounts a batch f's goroutine is done with, and lets it go.
func (s *Sink) batchDone(f *openFile, b batch) {
	f.consumed.Add(b.bytes)
	if f.w != nil {
		f.written.Store(f.w.Written())
	}
	if b.done != nil {
		close(b.done)
	} else {
		s.budget.Release(budget.QueuedRecords, b.bytes)
		putRecs(b.recs)
	}
}

// encodeRecs encodes recs into f's open chain; ctx is the Write's that
// brought them, or the sink's.
func (s *Sink) encodeRecs(f *openFile, ctx context.Context, recs []*kgo.Record) {
	f.gate.ctx = ctx
	defer func() { f.gate.ctx = nil }()
	for _, r := range recs {
		if err := s.encodeOne(ctx, f, r); err != nil {
			// The file is never published (finish reports err).
			s.fileFailed(f, err)
			return
		}
	}
}

// encodeOne encodes r into f, or hands it to the error policy if the
// format refuses it. An error is the file's.
func (s *Sink) encodeOne(ctx context.Context, f *openFile, r *kgo.Record) error {
	err := f.enc.Encode(r)
	if err == nil {
		f.encoded++
		return nil
	}
	if s.cfg.ErrRecord != nil && errors.Is(err, s.cfg.ErrRecord) {
		return s.skipLate(ctx, f, r, fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err))
	}
	return fmt.Errorf("write %s: %w", f.key, err)
}

// skipLate applies the error policy to r, which f's goroutine could not
// encode, and accounts its offset as handled without a file, as a record
// the poll side skips is.
func (s *Sink) skipLate(ctx context.Context, f *openFile, r *kgo.Record, cause error) error {
	dead, err := s.policy(ctx, r, cause)
	if err != nil {
		return err
	}
	if dead {
		s.lateDeadLettered.Add(1)
	}
	s.lateSkipped.Add(1)
	s.tracker.Unroute(f.tp, r.Offset, f.u)
	return nil
}

// finish writes the file's trailer and flushes its compressor.
func (s *Sink) finish(f *openFile) error {
	if f.charged {
		defer s.budget.Release(budget.FileEncoders, s.cfg.CompressorMemory)
	}
	if f.err != nil {
		f.discard()
		return fmt.Errorf("finish %s: %w", f.key, f.err)
	}
	// The trailer may be large (a parquet row group): let the gate wait on
	// storage while the budget is over its limit, until the sink stops.
	f.gate.ctx = s.ctx
	defer func() { f.gate.ctx = nil }()
	err := f.enc.Close()
	if cerr := f.comp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("finish %s: %w", f.key, err)
	}
	f.written.Store(f.w.Written())
	return nil
}
