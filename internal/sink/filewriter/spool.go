package filewriter

import (
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
)

// With a spool (Config.Spool; docs/design.md, "Spool"), an open file's
// goroutine does not open its storage writer and encoder: it appends each
// batch to the file's spool file, and the batch's memory is released as
// when it is encoded. Once the file is closed, it goes direct: it takes one
// of the encode slots, opens its chain as open does, replays the spool
// file through encode, finishes the file and frees the slot, and only then
// waits, in upload, for the partition's previous file to be published. A
// file waiting for its predecessor holding a slot would deadlock with a
// predecessor waiting for a slot. Only when records are encoded changes:
// publication order, commits, the ledger and fencing are as without a
// spool.
//
// A spool file that can't be created or appended to (the disk full, the
// directory gone or read-only) is cut back to its last whole batch, and
// the file goes direct at once, as an open file without a spool: its
// records spooled so far are replayed into its chain, and the failing
// batch and the later ones are encoded as they come. The next file tries
// the spool again. Reading a spool file back failing is the file's error:
// it is never published, the sink stops, and nothing past it is committed.

// sample seeds the spool's ratio (spooling.State.Sample) from the sink's
// first batch, encoded into a chain that stores nothing. The sample's
// fixed cost (an empty file: headers, footers) is taken off.
// f's goroutine, for the sink's first spooled batch.
func (s *Shared) sample(f *File, b Batch) {
	if len(b.Recs) == 0 || !s.spooling.Sample() {
		return
	}
	s.budget.Acquire(budget.FileEncoders, s.cfg.CompressorMemory)
	defer s.budget.Release(budget.FileEncoders, s.cfg.CompressorMemory)
	empty, err := s.encodedSize(f, nil)
	if err != nil {
		return
	}
	full, err := s.encodedSize(f, b.Recs)
	if err != nil || b.Bytes <= 0 {
		return
	}
	s.spooling.Seed(float64(full-empty) / float64(b.Bytes))
}

// encodedSize is the size of a file of recs, skipping those the format
// refuses.
// f's goroutine.
func (s *Shared) encodedSize(f *File, recs []*kgo.Record) (int64, error) {
	var n countWriter
	comp, err := s.cfg.NewCompressor(&n)
	if err != nil {
		return 0, err
	}
	enc, err := s.newEncoder(f, comp, true)
	if err != nil {
		_ = comp.Close()
		return 0, err
	}
	for _, r := range recs {
		_ = enc.Encode(r)
	}
	err = enc.Close()
	if cerr := comp.Close(); err == nil {
		err = cerr
	}
	return int64(n), err
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// runSpooled is a spooled file's goroutine: see the top of this file.
// run calls it, on f's goroutine.
func (s *Shared) runSpooled(f *File) {
	defer func() {
		if !f.spoolCostMoved {
			s.budget.Release(budget.SpoolFiles, budget.SpoolFileCost)
		}
	}()
	if sf, err := s.cfg.Spool.Create(); err != nil {
		s.spoolFault(f, err)
		s.goDirect(f, false)
	} else {
		f.sf = sf
	}
	for b := range f.q {
		if f.sf == nil {
			s.encode(f, b)
			continue
		}
		s.sample(f, b)
		s.spoolBatch(f, b)
	}
	if f.abandon.Load() {
		s.abandoned(f)
		s.unspool(f)
		close(f.finished)
		return
	}
	slot, active := false, false
	defer func() {
		if active {
			s.spooling.Inactive(s.budget)
		}
	}()
	if prev := f.turn.PrevEncoded(); f.sf != nil && f.err == nil && prev != nil {
		// Encode a partition's files in their order: a file encoded before
		// its predecessor would hold its writer's buffers while it waits
		// to be published, and enough of those would take the budget past
		// its limit. The predecessor never waits for this file.
		select {
		case <-prev:
		case <-s.ctx.Done():
		}
	}
	if f.sf != nil && f.err == nil {
		slot, active = s.encodeSlot(f)
	}
	in := f.consumed.Load()
	err := s.finish(f)
	if slot {
		// Before upload waits for the previous file: see the top.
		s.spooling.FreeSlot()
	}
	if err == nil && slot {
		s.spooling.Learn(in, f.w.Written())
	}
	// The spool file is of no use once encoded: nothing is ever retried
	// from it, so its disk is freed now, not after the upload.
	s.unspool(f)
	close(f.finished)
	s.upload(f, err)
}

// encodeSlot takes an encode slot for f, closed, and room in the budget
// for its chain (spooling.State.WaitRoom), then makes it go direct: slot
// says it holds a slot, and active that it counts as active in the spool
// state. On a stop it fails f instead.
// f's goroutine (runSpooled).
func (s *Shared) encodeSlot(f *File) (slot, active bool) {
	if !s.spooling.TakeSlot(s.ctx) {
		s.fileFailed(f, fmt.Errorf("finish %s: %w", f.key, s.ctx.Err()))
		return false, false
	}
	if err := s.spooling.WaitRoom(s.ctx, s.budget, s.fileMem+s.bucket.ChunkSize()); err != nil {
		s.fileFailed(f, fmt.Errorf("finish %s: %w", f.key, err))
		return true, false
	}
	s.goDirect(f, true)
	return true, true
}

// spoolBatch appends b to f's spool file, or, if that fails, makes f go
// direct and encodes b.
// f's goroutine.
func (s *Shared) spoolBatch(f *File, b Batch) {
	defer s.batchDone(f, b)
	if f.err != nil || f.abandon.Load() || len(b.Recs) == 0 {
		return
	}
	n, err := f.sf.Append(b.Recs)
	if err != nil {
		s.spoolFault(f, err)
		if s.goDirect(f, false) {
			s.encodeRecs(f, b.Ctx, b.Recs)
		}
		return
	}
	s.spooling.Works()
	f.spoolBytes.Add(n)
	s.budget.Acquire(budget.SpooledRecords, n)
}

// spoolFault counts a spool file that failed, and logs the first of an
// outage.
// f's goroutine.
func (s *Shared) spoolFault(f *File, err error) { s.spooling.Fault(f.key, err) }

// goDirect opens f's chain, charges it, and encodes into it what f
// spooled so far; the spool file is then removed. slot: f is closed and
// encodes in an encode slot. It reports whether f can take more records.
// f's goroutine.
func (s *Shared) goDirect(f *File, slot bool) bool {
	s.chargeChain(f)
	if err := s.open(f, slot); err != nil {
		s.fileFailed(f, err)
		return false
	}
	f.direct.Store(true)
	if f.sf == nil {
		return true
	}
	if err := s.replay(f); err != nil {
		s.fileFailed(f, err)
		return false
	}
	s.unspool(f)
	return f.err == nil
}

// replay encodes f's spool file into its chain.
// f's goroutine.
func (s *Shared) replay(f *File) error {
	f.gate.Bind(s.ctx)
	defer func() { f.gate.Unbind() }()
	r := f.sf.Reader()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s back from the spool: %w", f.key, err)
		}
		if err := s.encodeOne(s.ctx, f, rec); err != nil {
			return err
		}
	}
}

// unspool removes f's spool file, if any, and releases its disk.
// f's goroutine.
func (s *Shared) unspool(f *File) {
	if f.sf == nil {
		return
	}
	if err := f.sf.Remove(); err != nil {
		s.log.Warn("could not remove a spool file; it is removed with the spool's directory when Spillway stops or next starts", "err", err)
	}
	s.budget.Release(budget.SpooledRecords, f.spoolBytes.Swap(0))
	f.sf = nil
}
