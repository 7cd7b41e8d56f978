// Package spooling is the sink-wide state of the disk spool's side
// (docs/design.md, "Spool"): the encode slots closed spooled files take
// turns in, the ratio of encoded to record bytes that sizes files before
// they are encoded, and the count of spool faults, logged once per outage.
// What one file does with its spool file is the sink's file goroutine's.
package spooling

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// Budget is the memory budget an encode slot's file waits in.
type Budget interface {
	HasRoom(n int64) bool
	WaitRoom(ctx context.Context, n int64, proceed func() bool) error
	Wake()
}

// State is a sink's spool state. Its methods may be called from any
// goroutine: it has its own lock and atomics, and never takes a caller's
// lock; each method says who calls it.
type State struct {
	slots chan struct{}
	log   *slog.Logger
	// in and out are the record bytes and the encoded bytes of the
	// spooled files stored so far, for the size estimate.
	mu      sync.Mutex
	in, out int64
	ratio   atomic.Uint64 // float64 bits: out / in, 1 until a file is stored
	sampled atomic.Bool   // the first batch was sampled (see Sample)
	faults  atomic.Int64
	// waiting counts closed files in a slot waiting for room (Waiting).
	waiting atomic.Int64
	// active counts spooled files gone direct in a slot whose upload has
	// not ended: the memory they hold is freed without waiting for
	// anything but storage.
	active atomic.Int64
	// failing is set from a fault until an append succeeds again, so that
	// an outage is logged once, not once per file.
	failing atomic.Bool
}

// New returns the state of a sink whose closed spooled files encode slots
// at a time (0: GOMAXPROCS), logging to log.
func New(slots int, log *slog.Logger) *State {
	if slots <= 0 {
		slots = runtime.GOMAXPROCS(0)
	}
	s := &State{slots: make(chan struct{}, slots), log: log}
	s.ratio.Store(math.Float64bits(1))
	return s
}

// Estimate is the stored size of a spooled file whose records are of n
// bytes: n at the ratio of encoded to record bytes learned from the
// spooled files stored so far, 1 at first. With compression the first
// files close below file.max_bytes, and later ones near it.
// The poll side (the sink's sizeLocked); it reads an atomic.
func (s *State) Estimate(n int64) int64 {
	return int64(float64(n) * math.Float64frombits(s.ratio.Load()))
}

// Learn adds a stored spooled file of in record bytes and out encoded
// bytes to the ratio. A file goroutine; it takes the state's lock.
func (s *State) Learn(in, out int64) {
	if in <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.in += in
	s.out += out
	s.ratio.Store(math.Float64bits(float64(s.out) / float64(s.in)))
}

// Sample reports true once, to the goroutine of the sink's first spooled
// batch, which then measures the format on that batch and gives the ratio
// to Seed: a format that makes records larger than they are (jsonl's
// envelope, base64) would otherwise, starting at 1, close the first files
// far above file.max_bytes, and in a drain of many partitions the first
// files of all of them close before any is stored to learn from.
// A file goroutine.
func (s *State) Sample() bool {
	return !s.sampled.Load() && !s.sampled.Swap(true)
}

// Seed sets the ratio from Sample's measure, r encoded bytes per record
// byte. The seed is never below 1, so that a format that shrinks records
// still closes its first files below the limit.
// The file goroutine Sample chose.
func (s *State) Seed(r float64) {
	if r > 1 {
		s.ratio.Store(math.Float64bits(r))
	}
}

// Fault counts a spool file that failed, and logs the first of an outage;
// key names the file.
// A file goroutine.
func (s *State) Fault(key string, err error) {
	s.faults.Add(1)
	if !s.failing.Swap(true) {
		s.log.Warn("the spool failed: files are written without it, in memory, until it works again; closing them early under memory pressure makes them smaller. "+fix(err),
			"file", key, "err", err)
	}
}

// Works ends an outage: the next fault is logged again.
// A file goroutine, after an append succeeded.
func (s *State) Works() { s.failing.Store(false) }

// Faults counts the spool files that could not be created or appended to.
// Any goroutine (Stats).
func (s *State) Faults() int64 { return s.faults.Load() }

// Waiting counts closed files in a slot waiting for room in the budget.
// Any goroutine (Stats).
func (s *State) Waiting() int64 { return s.waiting.Load() }

// fix says what to do about a spool error: only a full disk is helped by
// freeing space.
func fix(err error) string {
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

// TakeSlot takes an encode slot, waiting for one until ctx ends; it
// reports whether it took one, which FreeSlot gives back.
// A closed spooled file's goroutine.
func (s *State) TakeSlot(ctx context.Context) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// FreeSlot gives back a slot TakeSlot took.
// The goroutine that took it, once its file is encoded, before it waits
// for the partition's previous file to be published: a file waiting for
// its predecessor holding a slot would deadlock with a predecessor
// waiting for a slot.
func (s *State) FreeSlot() { <-s.slots }

// WaitRoom waits, in a slot, until need bytes (a file's chain and the
// chunk it fills) fit in b, or ctx ends. Those are charged as the file
// goes direct, and held until it is published: closed files waiting
// their turn to be published would otherwise take the budget past its
// limit. Only uploads and commits free that memory, and none of them
// waits for a slot. In the slot, so that the slots' files charge one at a
// time. Unless no spooled file is encoding or being published: then what
// holds the memory is not freed by waiting (closed files waiting their
// turn hold some themselves). With nil, the file counts as active until
// Inactive.
// A closed spooled file's goroutine, in a slot.
func (s *State) WaitRoom(ctx context.Context, b Budget, need int64) error {
	alone := func() bool { return s.active.Load() == 0 }
	waits := !b.HasRoom(need) && !alone()
	if waits {
		s.waiting.Add(1)
	}
	err := b.WaitRoom(ctx, need, alone)
	if waits {
		s.waiting.Add(-1)
	}
	if err == nil {
		s.active.Add(1)
	}
	return err
}

// Inactive ends what WaitRoom began, once the file's upload ended: when
// no file is active any more, b's waiters look again.
// The file's goroutine.
func (s *State) Inactive(b Budget) {
	if s.active.Add(-1) == 0 {
		b.Wake()
	}
}
