// Package filewriter is the sink's file goroutines: one per open file,
// each encodes the record batches the sink's poll side hands it, through
// the chain encoder ▸ compressor ▸ gate ▸ storage writer, then, once the
// file is closed, finishes it and publishes it in its partition's turn
// (package publish). With a spool (docs/design.md, "Spool"), a file's
// records go to disk until it closes, and it is encoded then, in one of
// the encode slots (package spooling).
//
// Concurrency: a File's state is its goroutine's. The poll side, which
// creates the file (Start) and closes it (Close, Abandon), owns its queue
// and reads its progress through the methods that say so; they read
// atomics. A file goroutine never takes a lock of the poll side's, so the
// poll side may wait for one with its lock held.
package filewriter

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink/gate"
	"github.com/spillway/spillway/internal/sink/publish"
	"github.com/spillway/spillway/internal/sink/reuse"
	"github.com/spillway/spillway/internal/sink/spooling"
	"github.com/spillway/spillway/internal/spool"
)

// Bucket is where files are committed.
type Bucket interface {
	NewWriter(ctx context.Context, key string, meta map[string]string) (Writer, error)
	// WriterMemory is what one writer holds besides its queued chunks.
	WriterMemory() int64
	// ChunkSize is the size of one chunk of a writer's queue.
	ChunkSize() int64
}

// Writer streams one file to storage. It is used by one goroutine at a
// time. Nothing is visible under its key until Commit returns nil, and then
// the file is durable; Commit fails with storage.ErrExists if the key is
// taken. Abort discards the file.
type Writer interface {
	io.Writer
	// Written is the number of bytes written so far.
	Written() int64
	// CRC32C is the CRC-32C (Castagnoli) of the bytes written so far,
	// which the file's ledger entry records before Commit.
	CRC32C() uint32
	// WaitQueued blocks until at most max written bytes wait for storage,
	// the upload failed, or ctx ends.
	WaitQueued(ctx context.Context, max int64) error
	Commit() error
	Abort()
}

// Typer builds the encoder of a file typed by registry schemas
// (sink.Schemas).
type Typer interface {
	NewEncoder(w io.Writer, schemas string) (format.Encoder, error)
}

// Config is what the file goroutines share, set once by the sink.
type Config struct {
	// NewEncoder and NewCompressor build a file's chain; CompressorMemory
	// is what one compressor plus encoder holds, for the budget. Schemas,
	// when set, builds encoders instead, for files typed by schemas;
	// NewBufferedEncoder, when set, for the formats that buffer blocks or
	// row groups of FlushBytes (SlotFlushBytes in an encode slot).
	NewEncoder                 func(w io.Writer) (format.Encoder, error)
	NewCompressor              func(w io.Writer) (io.WriteCloser, error)
	CompressorMemory           int64
	Schemas                    Typer
	NewBufferedEncoder         func(w io.Writer, flushBytes int64, grow func(delta int64)) (format.Encoder, error)
	FlushBytes, SlotFlushBytes int64
	// ErrRecord tells record errors (Policy applies) from I/O errors.
	ErrRecord error
	Policy    errpolicy.Policy
	// Spool, when set, stages open files' records on disk; Spooling is
	// then the sink's spool state.
	Spool    *spool.Spool
	Spooling *spooling.State
	// Published, when set, is told of every file published with its
	// ledger entry (sink.Config.Published).
	Published func(offsets.TopicPartition, ledger.Entry)

	Bucket  Bucket
	Budget  *budget.Budget
	Tracker *offsets.Tracker
	Log     *slog.Logger
	Chains  *reuse.Chains
	Order   *publish.Order
	// Fail stops the sink with its first fatal error: any goroutine.
	Fail func(error)
}

// Shared is the state every file goroutine of a sink shares. Its fields
// are set by New and read-only after, or synchronize themselves.
type Shared struct {
	cfg      Config
	ctx      context.Context // ends uploads on hard stop
	bucket   Bucket
	budget   *budget.Budget
	tracker  *offsets.Tracker
	log      *slog.Logger
	spooling *spooling.State
	chains   *reuse.Chains
	pub      *publish.Order
	fail     func(error)
	// fileMem is what an open file's encoder and writer are charged.
	fileMem int64

	// Counters the file goroutines update; the poll side reads them.
	uploading, filesUploaded, bytesUploaded, storedRecords atomic.Int64
	// Records the error policy skipped or dead-lettered once their file's
	// goroutine found they could not be encoded.
	lateSkipped, lateDeadLettered atomic.Int64
	// inflight counts closed files until their upload ended; running
	// counts file goroutines.
	inflight, running sync.WaitGroup
}

// New returns the file goroutines' shared state; ctx ends their uploads
// (the sink's hard stop).
func New(ctx context.Context, cfg Config) *Shared {
	return &Shared{
		cfg: cfg, ctx: ctx, bucket: cfg.Bucket, budget: cfg.Budget, tracker: cfg.Tracker, log: cfg.Log,
		spooling: cfg.Spooling, chains: cfg.Chains, pub: cfg.Order, fail: cfg.Fail,
		fileMem: cfg.CompressorMemory + cfg.Bucket.WriterMemory(),
	}
}

// Counts are the file goroutines' counters.
type Counts struct {
	Uploading, FilesUploaded, BytesUploaded, Stored int64
	// LateSkipped and LateDeadLettered are records the error policy
	// skipped or dead-lettered once their goroutine could not encode them.
	LateSkipped, LateDeadLettered int64
}

// Counts reads the counters. Any goroutine.
func (s *Shared) Counts() Counts {
	return Counts{
		Uploading: s.uploading.Load(), FilesUploaded: s.filesUploaded.Load(),
		BytesUploaded: s.bytesUploaded.Load(), Stored: s.storedRecords.Load(),
		LateSkipped: s.lateSkipped.Load(), LateDeadLettered: s.lateDeadLettered.Load(),
	}
}

// Uploading counts closed files whose upload has not ended.
// Any goroutine (the poll side's relief).
func (s *Shared) Uploading() int64 { return s.uploading.Load() }

// WaitUploads waits until every closed file's upload ended, or ctx ends.
// Any goroutine but a file's (Sink.Flush).
func (s *Shared) WaitUploads(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait waits until every file goroutine returned. Call it once the
// context New was given has ended and every file is closed or abandoned:
// then nothing they wait for is left.
// Any goroutine but a file's (Sink.Close).
func (s *Shared) Wait() { s.running.Wait() }

// Batch is records handed to a file's goroutine, of Bytes in all. Unless
// the sender waits for it (Done), its bytes were acquired as
// budget.QueuedRecords and are released once the batch is encoded. Ctx is
// the Write's, for the dead-letter topic and the gate's waits.
type Batch struct {
	Ctx   context.Context
	Recs  []*kgo.Record
	Bytes int64
	Done  chan struct{} // when set, closed once the batch is encoded
}

// recsPool recycles batch slices between file goroutines and the poll side.
var recsPool = sync.Pool{New: func() any { return new([]*kgo.Record) }}

// GetRecs and PutRecs take a batch slice from the pool and give it back:
// any goroutine.
func GetRecs() []*kgo.Record { return (*recsPool.Get().(*[]*kgo.Record))[:0] }

// PutRecs: see GetRecs.
func PutRecs(rs []*kgo.Record) {
	clear(rs) // let the records go
	rs = rs[:0]
	recsPool.Put(&rs)
}

// Spec is what the poll side decided of a file as it opens it.
type Spec struct {
	TP      offsets.TopicPartition
	Key     string
	Start   int64         // its first offset
	Schemas string        // see sink.Schemas.Of
	Unit    *offsets.Unit // the file's offsets in the tracker
}

// File is one file, open or being finished and published. The fields
// here are set by Start before the goroutine starts and never change, so
// any goroutine reads them; the worker's state is its goroutine's.
type File struct {
	s       *Shared
	tp      offsets.TopicPartition
	key     string
	start   int64
	schemas string
	u       *offsets.Unit
	// spooled: the file's records go to the spool (spool.go).
	spooled bool
	// q carries batches from the poll side, which closes it when the file
	// closes or is dropped, to the file's goroutine.
	q chan Batch
	// finished is closed by the file's goroutine once encoding ended and
	// the encoder's memory is released.
	finished chan struct{}
	// turn is the file's place in its partition's publication order.
	turn *publish.Turn
	// spoolCostMoved: closed, its SpoolFileCost was released for
	// ClosedFiles, by the poll side before it closed q.
	spoolCostMoved bool

	worker
}

// worker is an open file's goroutine-owned state. The plain fields are
// touched only by that goroutine. The atomics are how the poll side reads
// its progress (size, relief) and tells it to give up (abandon).
type worker struct {
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

// Start opens a file and starts its goroutine, which holds a queue of
// queued batches at most. The file is charged in the budget now: its
// encoder and writer, or with a spool budget.SpoolFileCost, until it goes
// direct. Its writer and encoder are opened by its goroutine (see open):
// a local bucket creates a file, which the poll loop need not wait for.
// The poll side, its lock held; it takes the publication order's lock.
func (s *Shared) Start(sp Spec, queue int) *File {
	f := &File{s: s, tp: sp.TP, key: sp.Key, start: sp.Start, schemas: sp.Schemas, u: sp.Unit,
		spooled: s.cfg.Spool != nil, q: make(chan Batch, queue), finished: make(chan struct{})}
	f.turn = s.pub.Open(sp.TP, f.finished)
	if f.spooled {
		// Its encoder and writer are charged when it goes direct.
		s.budget.Acquire(budget.SpoolFiles, budget.SpoolFileCost)
	} else {
		s.chargeChain(f)
	}
	s.running.Add(1)
	go s.run(f)
	return f
}

// Queue is where the poll side hands f its batches.
// The poll side, until it closes f.
func (f *File) Queue() chan<- Batch { return f.q }

// Close hands f, closed, to its goroutine, which finishes it and publishes
// it in its partition's turn. Its writer keeps its buffers until the
// commit ends: what the file holds from now on besides them is charged
// as budget.ClosedFiles.
// The poll side, its lock held, once every batch of f was queued; it takes
// the publication order's lock.
func (f *File) Close() {
	s := f.s
	s.budget.Acquire(budget.ClosedFiles, pendingCost)
	if f.spooled {
		// pendingCost counts its goroutine and state from now on.
		s.budget.Release(budget.SpoolFiles, budget.SpoolFileCost)
		f.spoolCostMoved = true
	}
	s.inflight.Add(1)
	s.uploading.Add(1)
	s.pub.Queue(f.turn)
	close(f.q) // the goroutine finishes the file, then uploads it
}

// Abandon makes f's goroutine discard what it is given and store nothing.
// The poll side, its lock held, instead of Close: the file was dropped,
// or its records did not all reach it.
func (f *File) Abandon() {
	f.abandon.Store(true)
	close(f.q)
}

// Finished is closed once f's goroutine finished encoding it and released
// its encoder's memory. Any goroutine.
func (f *File) Finished() <-chan struct{} { return f.finished }

// Spooled says whether f's records go to the spool. Any goroutine.
func (f *File) Spooled() bool { return f.spooled }

// Direct says whether f's chain is open: not spooled, or gone direct.
// Any goroutine; it reads an atomic.
func (f *File) Direct() bool { return f.direct.Load() }

// Written and Consumed are f's progress: the bytes it wrote, and the
// record bytes it encoded or spooled. Any goroutine; they read atomics.
func (f *File) Written() int64 { return f.written.Load() }

// Consumed: see Written.
func (f *File) Consumed() int64 { return f.consumed.Load() }

// SpoolBytes is what f's spool file holds. Any goroutine (relief).
func (f *File) SpoolBytes() int64 { return f.spoolBytes.Load() }

// Memory is what closing f frees besides its encoder and writer, which
// every file holds alike: its open block or row group. Records queued to
// it are encoded whether it closes or not, so they don't count.
// Any goroutine: the poll side reads it for relief.
func (f *File) Memory() int64 { return f.buffered.Load() }

// grow is f's format.Memory.Grow: what its encoder buffers is counted in
// the budget, and in f, for relief.
// The encoder calls it on f's goroutine.
func (f *File) grow(s *Shared) func(int64) {
	return func(d int64) {
		f.buffered.Add(d)
		if d >= 0 {
			s.budget.Acquire(budget.FileBuffers, d)
		} else {
			s.budget.Release(budget.FileBuffers, -d)
		}
	}
}

// newEncoder builds f's encoder, typed with f.schemas (named on the poll
// side, where the records are in order, by its first record). slot: see
// open.
// f's goroutine.
func (s *Shared) newEncoder(f *File, w io.Writer, slot bool) (format.Encoder, error) {
	if s.cfg.Schemas != nil {
		return s.cfg.Schemas.NewEncoder(w, f.schemas)
	}
	if s.cfg.NewBufferedEncoder != nil {
		flush := s.cfg.FlushBytes
		if slot {
			flush = s.cfg.SlotFlushBytes
		}
		return s.cfg.NewBufferedEncoder(w, flush, f.grow(s))
	}
	return s.cfg.NewEncoder(w)
}

// policy sends r to the dead-letter topic (dead) or, if the policy
// tolerates it, logs it; otherwise it returns the error that stops the
// sink. The caller then accounts r as handled.
// f's goroutine (skipLate); it may wait for the dead-letter topic.
func (s *Shared) policy(ctx context.Context, r *kgo.Record, cause error) (dead bool, err error) {
	out, err := s.cfg.Policy.Apply(ctx, r, cause)
	return out == errpolicy.DeadLettered, err
}
