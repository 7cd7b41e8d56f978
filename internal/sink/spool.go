package sink

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

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

// spooling is the sink's state for the spool.
type spooling struct {
	slots chan struct{}
	// in and out are the record bytes and the encoded bytes of the
	// spooled files stored so far, for the size estimate.
	mu      sync.Mutex
	in, out int64
	ratio   atomic.Uint64 // float64 bits: out / in, 1 until a file is stored
	sampled atomic.Bool   // the first batch was sampled (see sample)
	faults  atomic.Int64
	// waiting counts closed files in a slot waiting for room (Stats).
	waiting atomic.Int64
	// active counts spooled files gone direct in a slot whose upload has
	// not ended: the memory they hold is freed without waiting for
	// anything but storage.
	active atomic.Int64
	// failing is set from a fault until an append succeeds again, so that
	// an outage is logged once, not once per file.
	failing atomic.Bool
}

// init sets the encode slots up. New calls it.
func (sp *spooling) init(slots int) {
	if slots <= 0 {
		slots = runtime.GOMAXPROCS(0)
	}
	sp.slots = make(chan struct{}, slots)
	sp.ratio.Store(math.Float64bits(1))
}

// estimate is the stored size of a spooled file whose records are of n
// bytes: n at the ratio of encoded to record bytes learned from the
// spooled files stored so far, 1 at first. With compression the first
// files close below file.max_bytes, and later ones near it.
// The poll side (sizeLocked); it reads an atomic.
func (sp *spooling) estimate(n int64) int64 {
	return int64(float64(n) * math.Float64frombits(sp.ratio.Load()))
}

// learn adds a stored spooled file of in record bytes and out encoded
// bytes to the ratio. A file goroutine; it takes sp.mu.
func (sp *spooling) learn(in, out int64) {
	if in <= 0 {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.in += in
	sp.out += out
	sp.ratio.Store(math.Float64bits(float64(sp.out) / float64(sp.in)))
}

// sample seeds the ratio from the sink's first batch, encoded into a
// chain that stores nothing, when the format makes records larger than
// they are (jsonl's envelope, base64): starting at 1, the first files
// would then close far above file.max_bytes, and in a drain of many
// partitions the first files of all of them close before any is stored to
// learn from. The seed is never below 1, so that a format that shrinks
// records still closes its first files below the limit. The sample's
// fixed cost (an empty file: headers, footers) is taken off.
// f's goroutine, for the sink's first spooled batch.
func (s *Sink) sample(f *openFile, b batch) {
	if len(b.recs) == 0 || s.spooling.sampled.Load() || s.spooling.sampled.Swap(true) {
		return
	}
	s.budget.Acquire(budget.FileEncoders, s.cfg.CompressorMemory)
	defer s.budget.Release(budget.FileEncoders, s.cfg.CompressorMemory)
	empty, err := s.encodedSize(f, nil)
	if err != nil {
		return
	}
	full, err := s.encodedSize(f, b.recs)
	if err != nil || b.bytes <= 0 {
		return
	}
	if r := float64(full-empty) / float64(b.bytes); r > 1 {
		s.spooling.ratio.Store(math.Float64bits(r))
	}
}

// encodedSize is the size of a file of recs, skipping those the format
// refuses.
// f's goroutine.
func (s *Sink) encodedSize(f *openFile, recs []*kgo.Record) (int64, error) {
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

// memory is what closing f frees besides its encoder and writer, which
// every file holds alike: its open block or row group. Records queued to
// it are encoded whether it closes or not, so they don't count.
// Any goroutine: the poll side reads it for relief.
func (f *openFile) memory() int64 { return f.buffered.Load() }

// grow is f's format.Memory.Grow: what its encoder buffers is counted in
// the budget, and in f, for relief.
// The encoder calls it on f's goroutine.
func (f *openFile) grow(s *Sink) func(int64) {
	return func(d int64) {
		f.buffered.Add(d)
		if d >= 0 {
			s.budget.Acquire(budget.FileBuffers, d)
		} else {
			s.budget.Release(budget.FileBuffers, -d)
		}
	}
}

// runSpooled is a spooled file's goroutine: see the top of this file.
// run calls it, on f's goroutine.
func (s *Sink) runSpooled(f *openFile) {
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
		if active && s.spooling.active.Add(-1) == 0 {
			s.budget.Wake()
		}
	}()
	if f.sf != nil && f.err == nil && f.prev != nil {
		// Encode a partition's files in their order: a file encoded before
		// its predecessor would hold its writer's buffers while it waits
		// to be published, and enough of those would take the budget past
		// its limit. The predecessor never waits for this file.
		select {
		case <-f.prev.finished:
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
		<-s.spooling.slots
	}
	if err == nil && slot {
		s.spooling.learn(in, f.w.Written())
	}
	// The spool file is of no use once encoded: nothing is ever retried
	// from it, so its disk is freed now, not after the upload.
	s.unspool(f)
	close(f.finished)
	s.upload(f, err)
}

// encodeSlot takes an encode slot for f, closed, and room in the budget
// for its chain, then makes it go direct: slot says it holds a slot, and
// active that it counts in spooling.active. On a stop it fails f instead.
// f's goroutine (runSpooled).
func (s *Sink) encodeSlot(f *openFile) (slot, active bool) {
	select {
	case s.spooling.slots <- struct{}{}:
		slot = true
		// Its chain and the chunk it fills are charged as it goes
		// direct, and held until it is published: wait until they
		// fit, or closed files waiting their turn to be published
		// would take the budget past its limit. Only uploads and
		// commits free that memory, and none of them waits for a
		// slot. In the slot, so that the slots' files charge one at
		// a time.
		// Unless no spooled file is encoding or being published:
		// then what holds the memory is not freed by waiting (closed
		// files waiting their turn hold some themselves).
		need := s.fileMem + s.bucket.ChunkSize()
		alone := func() bool { return s.spooling.active.Load() == 0 }
		waits := !s.budget.HasRoom(need) && !alone()
		if waits {
			s.spooling.waiting.Add(1)
		}
		err := s.budget.WaitRoom(s.ctx, need, alone)
		if waits {
			s.spooling.waiting.Add(-1)
		}
		if err != nil {
			s.fileFailed(f, fmt.Errorf("finish %s: %w", f.key, err))
		} else {
			s.spooling.active.Add(1)
			active = true
			s.goDirect(f, true)
		}
	case <-s.ctx.Done():
		s.fileFailed(f, fmt.Errorf("finish %s: %w", f.key, s.ctx.Err()))
	}
	return slot, active
}

// spoolBatch appends b to f's spool file, or, if that fails, makes f go
// direct and encodes b.
// f's goroutine.
func (s *Sink) spoolBatch(f *openFile, b batch) {
	defer s.batchDone(f, b)
	if f.err != nil || f.abandon.Load() || len(b.recs) == 0 {
		return
	}
	n, err := f.sf.Append(b.recs)
	if err != nil {
		s.spoolFault(f, err)
		if s.goDirect(f, false) {
			s.encodeRecs(f, b.ctx, b.recs)
		}
		return
	}
	s.spooling.failing.Store(false)
	f.spoolBytes.Add(n)
	s.budget.Acquire(budget.SpooledRecords, n)
}

// spoolFault counts a spool file that failed, and logs the first of an
// outage.
// f's goroutine.
func (s *Sink) spoolFault(f *openFile, err error) {
	s.spooling.faults.Add(1)
	if !s.spooling.failing.Swap(true) {
		s.log.Warn("the spool failed: files are written without it, in memory, until it works again; closing them early under memory pressure makes them smaller. "+spoolFix(err),
			"file", f.key, "err", err)
	}
}

// spoolFix says what to do about a spool error: only a full disk is
// helped by freeing space.
func spoolFix(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "The disk under backpressure.spool_dir is full: free space there, or raise backpressure.disk_limit only within the space there is"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return "backpressure.spool_dir can't be written: make it writable by this process"
	case errors.Is(err, syscall.ENOTDIR):
		return "backpressure.spool_dir, or a directory in its path, is not a directory: put the directory back"
	case errors.Is(err, fs.ErrNotExist):
		return "backpressure.spool_dir was removed and can't be created again: create it, writable by this process"
	}
	return "Check backpressure.spool_dir and its disk"
}

// goDirect opens f's chain, charges it, and encodes into it what f
// spooled so far; the spool file is then removed. slot: f is closed and
// encodes in an encode slot. It reports whether f can take more records.
// f's goroutine.
func (s *Sink) goDirect(f *openFile, slot bool) bool {
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
func (s *Sink) replay(f *openFile) error {
	f.gate.ctx = s.ctx
	defer func() { f.gate.ctx = nil }()
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
func (s *Sink) unspool(f *openFile) {
	if f.sf == nil {
		return
	}
	if err := f.sf.Remove(); err != nil {
		s.log.Warn("could not remove a spool file; it is removed with the spool's directory when Spillway stops or next starts", "err", err)
	}
	s.budget.Release(budget.SpooledRecords, f.spoolBytes.Swap(0))
	f.sf = nil
}
