package filewriter

import (
	"context"
	"errors"
	"fmt"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/sink/gate"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The file goroutine: run (runSpooled with a spool, spool.go) encodes the
// batches the poll side hands over, through the chain encoder ▸ compressor
// ▸ gate ▸ storage writer, then finishes the file, keeps its chain for the
// next (package reuse), and publishes it (upload, upload.go). Functions
// here run on a file's goroutine, one per file.

// run is a file's goroutine: it encodes the batches handed to it, then
// finishes and uploads the file, or abandons it if the file was dropped.
// A spooled file's goroutine is runSpooled.
// Start starts it.
func (s *Shared) run(f *File) {
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
// f's goroutine; it takes the sink's error lock (Fail).
func (s *Shared) fileFailed(f *File, err error) {
	if f.err == nil {
		f.err = err
	}
	s.fail(err)
	s.tracker.Fail(err)
}

// chargeChain counts f's encoder and storage writer in the budget.
// The poll side as f opens (Start, its lock held, before f's goroutine
// starts), or f's goroutine as a spooled file goes direct.
func (s *Shared) chargeChain(f *File) {
	f.charged = true
	s.budget.Acquire(budget.FileEncoders, s.cfg.CompressorMemory)
	s.budget.Acquire(budget.WriterBuffers, s.bucket.WriterMemory())
}

// abandoned throws away a dropped file's chain and its memory.
// f's goroutine.
func (s *Shared) abandoned(f *File) {
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
func (s *Shared) open(f *File, slot bool) error {
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
func (f *File) discard() {
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
func (s *Shared) encode(f *File, b Batch) {
	defer s.batchDone(f, b)
	if f.err != nil || f.abandon.Load() {
		return
	}
	s.encodeRecs(f, b.Ctx, b.Recs)
}

// batchDone accounts a batch f's goroutine is done with, and lets it go.
// f's goroutine.
func (s *Shared) batchDone(f *File, b Batch) {
	f.consumed.Add(b.Bytes)
	if f.w != nil {
		f.written.Store(f.w.Written())
	}
	if b.Done != nil {
		close(b.Done)
	} else {
		s.budget.Release(budget.QueuedRecords, b.Bytes)
		PutRecs(b.Recs)
	}
}

// encodeRecs encodes recs into f's open chain; ctx is the Write's that
// brought them, or the sink's.
// f's goroutine.
func (s *Shared) encodeRecs(f *File, ctx context.Context, recs []*kgo.Record) {
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
func (s *Shared) encodeOne(ctx context.Context, f *File, r *kgo.Record) error {
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
func (s *Shared) skipLate(ctx context.Context, f *File, r *kgo.Record, cause error) error {
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
func (s *Shared) finish(f *File) error {
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
