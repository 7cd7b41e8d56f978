// Package budget is the byte accountant: the one place that knows how much
// memory Spillway's data holds, who holds it, and whether consumption must
// stop. How the memory limit is divided is told once, in plan.go.
//
// Holders acquire bytes when they take data in and release them when the data
// is gone (encoded, uploaded, dropped). Acquire never blocks: bytes that have
// already arrived are counted, not refused. Callers that can wait (the fetch
// loop) call Wait, which blocks while usage is above the high watermark, until
// it falls below the low watermark.
//
// All methods are safe for concurrent use.
package budget

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
)

// Holder names what a count of bytes is held for, in metrics and /status.
// Each name says what it counts.
type Holder string

// The holders Spillway uses.
const (
	// FetchBuffers is the share reserved for the Kafka client's fetch
	// buffers (Plan.Reserved), less what polled records took from it.
	FetchBuffers Holder = "fetch_buffers"
	// PolledRecords are records polled from the Kafka client and not yet
	// written, as far as they fit in the fetch share: their bytes move
	// from FetchBuffers.
	PolledRecords Holder = "polled_records"
	// PolledUnreserved are polled records beyond the fetch share: a record
	// larger than Plan.RecordRoom, returned whole in a fetch of its own.
	// They are counted apart, outside the limit: waiting can't free them,
	// and only writing them can (see Plan).
	PolledUnreserved Holder = "polled_unreserved"
	// QueuedRecords are records handed to an open file's encoder and not
	// yet encoded (see Plan on the queue between the stages).
	QueuedRecords Holder = "queued_records"
	// FileEncoders is the encoder and compressor state of open files,
	// charged when a file opens.
	FileEncoders Holder = "file_encoders"
	// FileBuffers are the blocks (avro) and row groups (parquet) that
	// open files buffer, counted as they grow and released as they are
	// written out.
	FileBuffers Holder = "file_buffers"
	// WriterBuffers are the part buffers storage writers hold of their
	// own (gocloud's, the AWS transfer manager's), for files open or being
	// committed.
	WriterBuffers Holder = "writer_buffers"
	// QueuedChunks are encoded bytes in part queues, not yet handed to
	// storage.
	QueuedChunks Holder = "queued_chunks"
	// ClosedFiles is the bookkeeping of closed files being committed,
	// besides their writer buffers.
	ClosedFiles Holder = "closed_files"
	// HeldObjects are the encoded objects of the one-object-per-key layout
	// (package latest), each its key's latest record, until a flush stores
	// them.
	HeldObjects Holder = "held_objects"
	// SpoolFiles is what an open file staged on the spool holds in memory
	// (its goroutine, queue and append buffer), charged when it opens,
	// instead of an encoder and a writer (see Plan.SpoolFileCost).
	SpoolFiles Holder = "spool_files"

	// SpooledRecords are the records of open files staged on local disk
	// (package spool), from when they are appended until the file is
	// stored or abandoned. The one holder of the disk resource.
	SpooledRecords Holder = "spooled_records"
)

// Resource is what a holder's bytes are of.
type Resource string

// The resources a Budget counts, each against a limit of its own.
const (
	Memory Resource = "memory"
	Disk   Resource = "disk"
)

// Resource is the resource h's bytes are of.
func (h Holder) Resource() Resource {
	if h == SpooledRecords {
		return Disk
	}
	return Memory
}

// Budget counts bytes against a limit with two watermarks: memory, and,
// once SetDiskLimit is called, local disk, against a limit and watermarks
// of its own. Consumption stops while either is above its high watermark,
// and resumes once both are below their low ones.
type Budget struct {
	limit, high, low int64

	mu   sync.Mutex
	disk diskCount
	used int64 // every holder but PolledUnreserved
	// over is used > limit, kept with used: OverLimit is asked at every
	// write of every file goroutine, which must not queue on mu for it.
	over    atomic.Bool
	peak    int64
	apart   int64 // PolledUnreserved
	apartPk int64
	by      map[Holder]int64
	records int64
	maxRecs int64
	paused  bool
	wake    chan struct{} // closed and replaced when usage drops
}

// diskCount is the disk resource: off while limit is 0.
type diskCount struct {
	limit, high, low int64
	used, peak       int64
}

// New returns a budget of limit bytes (Plan.Data), with the plan's
// watermarks. maxRecords > 0 adds a record-count trigger with the same
// meaning.
func New(limit, maxRecords int64) *Budget {
	high, low := watermarks(limit)
	return &Budget{
		limit:   limit,
		high:    high,
		low:     low,
		by:      map[Holder]int64{},
		maxRecs: maxRecords,
		wake:    make(chan struct{}),
	}
}

// Limit is the budget in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// SetDiskLimit turns on the disk resource, with limit bytes and the same
// watermarks as memory's. Call it before anything is acquired.
func (b *Budget) SetDiskLimit(limit int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.disk.limit = limit
	b.disk.high, b.disk.low = watermarks(limit)
}

// DiskLimit is the disk resource's limit, 0 when it is off.
func (b *Budget) DiskLimit() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.disk.limit
}

// MaxOpenFiles is how many open files of fileCost bytes each fit in the
// share of the budget for open files (see Plan.OpenFiles), at least one.
func (b *Budget) MaxOpenFiles(fileCost int64) int {
	return maxOpenFiles(openFilesBytes(b.limit), fileCost)
}

// MaxSpooledFiles is how many open files a spool allows (see
// Plan.MaxSpooledFiles).
func (b *Budget) MaxSpooledFiles() int {
	share := openFilesBytes(b.limit)
	return maxOpenFiles(share-share/encodeSlotsShare, SpoolFileCost)
}

// Acquire counts n more bytes for h.
func (b *Budget) Acquire(h Holder, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.by[h] += n
	switch {
	case h.Resource() == Disk:
		b.disk.used += n
		b.disk.peak = max(b.disk.peak, b.disk.used)
	case h == PolledUnreserved:
		b.apart += n
		b.apartPk = max(b.apartPk, b.apart)
	default:
		b.used += n
		b.peak = max(b.peak, b.used)
		b.over.Store(b.used > b.limit)
	}
	b.mu.Unlock()
}

// Release returns n bytes held for h.
func (b *Budget) Release(h Holder, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.by[h] -= n
	switch {
	case h.Resource() == Disk:
		b.disk.used -= n
	case h == PolledUnreserved:
		b.apart -= n
	default:
		b.used -= n
		b.over.Store(b.used > b.limit)
	}
	b.signalLocked()
	b.mu.Unlock()
}

// AddRecords counts records buffered in open files (negative to remove).
func (b *Budget) AddRecords(n int64) {
	b.mu.Lock()
	b.records += n
	if n < 0 {
		b.signalLocked()
	}
	b.mu.Unlock()
}

func (b *Budget) signalLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// Over reports whether usage of either resource is above its high
// watermark or the record count above its trigger: time to flush early
// and stop fetching.
func (b *Budget) Over() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.overLocked()
}

func (b *Budget) overLocked() bool {
	return b.overMemoryLocked() || b.overDiskLocked()
}

func (b *Budget) overMemoryLocked() bool {
	return b.used > b.high || (b.maxRecs > 0 && b.records >= b.maxRecs)
}

func (b *Budget) overDiskLocked() bool {
	return b.disk.limit > 0 && b.disk.used > b.disk.high
}

// OverMemory and OverDisk report, as Over does, on one resource: which
// files to close depends on which is short.
func (b *Budget) OverMemory() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.overMemoryLocked()
}

// OverRecords reports whether the record count alone is at its trigger
// (part of OverMemory).
func (b *Budget) OverRecords() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxRecs > 0 && b.records >= b.maxRecs
}

// OverDisk: see OverMemory.
func (b *Budget) OverDisk() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.overDiskLocked()
}

func (b *Budget) underLowLocked() bool {
	return b.memoryLowLocked() && b.diskLowLocked()
}

// MemoryLow and DiskLow report whether one resource is below its low
// watermark, which is what a paused fetch waits for.
func (b *Budget) MemoryLow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.memoryLowLocked()
}

// DiskLow: see MemoryLow. Without a spool, the disk is always low.
func (b *Budget) DiskLow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.diskLowLocked()
}

func (b *Budget) diskLowLocked() bool { return b.disk.limit == 0 || b.disk.used < b.disk.low }

func (b *Budget) memoryLowLocked() bool {
	return b.used < b.low && (b.maxRecs <= 0 || b.records*10 < b.maxRecs*7)
}

// OverLimit reports whether usage is above the limit itself, not just the
// high watermark: only a record larger than the room takes it there, as it
// is encoded (see Plan).
func (b *Budget) OverLimit() bool { return b.over.Load() }

// HasRoom reports whether n more bytes of memory fit under the limit, or
// memory is below the low watermark: then a charge bigger than the gap
// must still pass, or nothing could ever be opened.
func (b *Budget) HasRoom(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used+n <= b.limit || b.memoryLowLocked()
}

// WaitRoom blocks until HasRoom(n), or proceed reports true, or ctx ends.
// proceed is asked under the budget's lock, after every release and every Wake:
// it is the caller's way out when nothing it waits for could free memory.
func (b *Budget) WaitRoom(ctx context.Context, n int64, proceed func() bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used+n > b.limit && !b.memoryLowLocked() && (proceed == nil || !proceed()) {
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			b.mu.Lock()
			return ctx.Err()
		case <-wake:
		}
		b.mu.Lock()
	}
	return nil
}

// Wake makes WaitRoom ask its proceed function again.
func (b *Budget) Wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.signalLocked()
}

// WaitLow blocks until usage is below the low watermarks or ctx ends; it
// returns at once if it is below already. relieve, when set, is called
// without the budget's lock before the first wait and after every change:
// what frees memory may end (the last upload in flight), and then only
// the caller can free more (the sink, by closing files); a wait without
// it could last until file.max_age closed them.
func (b *Budget) WaitLow(ctx context.Context, relieve func(context.Context) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waitLowLocked(ctx, relieve)
}

// Wait returns at once if usage is not above the high watermark. Otherwise
// it is WaitLow.
func (b *Budget) Wait(ctx context.Context, relieve func(context.Context) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.overLocked() {
		return nil
	}
	return b.waitLowLocked(ctx, relieve)
}

// waitLowLocked waits, b.mu held (it is released while waiting), until
// usage is below the low watermarks.
func (b *Budget) waitLowLocked(ctx context.Context, relieve func(context.Context) error) error {
	if b.underLowLocked() {
		return nil
	}
	b.paused = true
	defer func() { b.paused = false }()
	for !b.underLowLocked() {
		wake := b.wake
		b.mu.Unlock()
		if relieve != nil {
			if err := relieve(ctx); err != nil {
				b.mu.Lock()
				return err
			}
		}
		select {
		case <-ctx.Done():
			b.mu.Lock()
			return ctx.Err()
		case <-wake:
		}
		b.mu.Lock()
	}
	return nil
}

// Snapshot is a consistent view of the budget.
type Snapshot struct {
	Limit int64
	// High is the high watermark: above it fetching pauses.
	High int64
	Used int64 // against Limit: every holder but PolledUnreserved
	Peak int64 // the highest Used
	// Unreserved and PeakUnreserved are the bytes of PolledUnreserved,
	// held over the limit, now and at most.
	Unreserved, PeakUnreserved int64
	Records                    int64
	Paused                     bool
	By                         []HolderBytes // memory's holders, largest first
	// Disk is the disk resource; its Limit is 0 when it is off.
	Disk DiskSnapshot
}

// DiskSnapshot is the disk resource's share of a Snapshot.
type DiskSnapshot struct {
	Limit, High, Used, Peak int64
	By                      []HolderBytes // largest first
}

// HolderBytes is one holder's share.
type HolderBytes struct {
	Holder Holder
	Bytes  int64
}

// Snapshot reports usage, the high-water mark and who holds what.
func (b *Budget) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{Limit: b.limit, High: b.high, Used: b.used, Peak: b.peak, Unreserved: b.apart, PeakUnreserved: b.apartPk,
		Records: b.records, Paused: b.paused}
	s.Disk = DiskSnapshot{Limit: b.disk.limit, High: b.disk.high, Used: b.disk.used, Peak: b.disk.peak}
	for h, n := range b.by {
		if h.Resource() == Disk {
			s.Disk.By = append(s.Disk.By, HolderBytes{h, n})
		} else {
			s.By = append(s.By, HolderBytes{h, n})
		}
	}
	sort.Slice(s.By, func(i, j int) bool { return s.By[i].Bytes > s.By[j].Bytes })
	sort.Slice(s.Disk.By, func(i, j int) bool { return s.Disk.By[i].Bytes > s.Disk.By[j].Bytes })
	return s
}
