package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/sink/gate"
	"github.com/spillway/spillway/internal/spool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The file goroutine: run (runSpooled with a spool, spool.go) encodes the
// batches the poll side hands over, through the chain encoder ▸ compressor
// ▸ gate ▸ storage writer, then finishes the file, keeps its chain for the
// next (package reuse), and publishes it (upload, publish.go). Functions here
// run on a file's goroutine, one per file, and never take router.mu: the
// poll side may be waiting on this goroutine with it held.

// fileWorker is an open file's goroutine-owned state. The plain fields are
// touched only by that goroutine. The atomics are how the poll side reads
// its progress (size, relief) and tells it to give up (abandon).
type fileWorker struct {
	w    Writer
	comp io.WriteCloser
	enc  format.Encoder
	gate *gate.Gate // between comp and w
	// encoded counts records in the file; err is the first error, after
	// which it encodes no more.
	encoded int64
	err     error
	// charged: its encoder and writer are charged in the budget.
	charged bool
	// sf is its spool file, nil once it went direct (spool.go).
	sf *spool.File

	// written and consumed are its progress, for the poll side's
	// estimate of the file's size.
	written, consumed atomic.Int64
	// spoolBytes is what sf holds, read by the poll side for relief;
	// direct is set once its chain is open; buffered is what its encoder
	// buffers (format.Memory.Grow).
	spoolBytes atomic.Int64
	direct     atomic.Bool
	buffered   atomic.Int64
	// abandon is set by the poll side, before it closes q, when the file
	// is dropped while open: store nothing.
	abandon atomic.Bool
}

// run is a file's goroutine: it encodes the batches handed to it, then
// finishes and uploads the file, or abandons it if the file was dropped.
// A spooled file's goroutine is runSpooled.
// fileFor starts it.
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
	if err == nil && f.schemas == "" {
		s.chains.Keep(f.enc, f.comp)
	}
	f.enc, f.comp = nil, nil // kept or let go: no longer this file's
	close(f.finished)
	s.upload(f, err)
}

// fileFailed records f's first error, after which it encodes no more and
// is never published, and stops the sink: Write and Flush return it.
// f's goroutine; it takes errMu.
func (s *Sink) fileFailed(f *openFile, err error) {
	if f.err == nil {
		f.err = err
	}
	s.fail(err)
	s.tracker.Fail(err)
}

// chargeChain counts f's encoder and storage writer in the budget.
// The poll side as f opens (fileFor, router.mu held, before f's goroutine
// starts), or f's goroutine as a spooled file goes direct.
func (s *Sink) chargeChain(f *openFile) {
	f.charged = true
	s.budget.Acquire(budget.FileEncoders, s.cfg.CompressorMemory)
	s.budget.Acquire(budget.WriterBuffers, s.bucket.WriterMemory())
}

// abandoned throws away a dropped file's chain and its memory.
// f's goroutine.
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
// f's goroutine.
func (s *Sink) open(f *openFile, slot bool) error {
	w, err := s.bucket.NewWriter(s.ctx, f.key, map[string]string{
		"spillway-topic":        f.tp.Topic,
		"spillway-partition":    fmt.Sprint(f.tp.Partition),
		"spillway-start-offset": fmt.Sprint(f.start),
	})
	if err != nil {
		return err
	}
	g := gate.New(w, s.budget)
	if f.schemas == "" { // a typed file's chain fits only its schemas
		if enc, comp, ok := s.chains.Take(g); ok {
			f.w, f.gate, f.comp, f.enc = w, g, comp, enc
			return nil
		}
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
// f's goroutine.
func (f *openFile) discard() {
	if f.w == nil {
		return
	}
	f.gate.Unbind() // nothing waits: the file is thrown away
	_ = f.enc.Close()
	_ = f.comp.Close()
	f.w.Abort()
}

// encode writes one batch into f. A record the format refuses goes to the
// error policy; any other error is the file's, and stops the sink.
// f's goroutine.
func (s *Sink) encode(f *openFile, b batch) {
	defer s.batchDone(f, b)
	if f.err != nil || f.abandon.Load() {
		return
	}
	s.encodeRecs(f, b.ctx, b.recs)
}

// batchDone accounts a batch f's goroutine is done with, and lets it go.
// f's goroutine.
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
// f's goroutine.
func (s *Sink) encodeRecs(f *openFile, ctx context.Context, recs []*kgo.Record) {
	f.gate.Bind(ctx)
	defer func() { f.gate.Unbind() }()
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
// f's goroutine.
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
// f's goroutine.
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
// f's goroutine.
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
	f.gate.Bind(s.ctx)
	defer func() { f.gate.Unbind() }()
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
