// Package sink routes records to open files, decides when a file rotates,
// hands finished files to storage, and tracks which offsets are durable.
//
// Records flow in two stages (docs/design.md, "The write pipeline"). The
// caller's goroutine, the one that polls Kafka, routes each record to its
// open file, accounts its offset, and decides rotations. Each open file has
// a goroutine of its own that encodes and compresses the record batches
// queued for it, through the chain encoder ▸ compressor ▸ storage writer,
// and, once the file is closed, finishes it and publishes it. Files encode
// in parallel, each in offset order. A partition has one open file per
// group of its records: the file name template rendered without
// {{start_offset}}, so a template with {{timestamp}} or {{key}} spreads one
// partition over several open files. Storage takes parts in the background
// and a closed file is committed in the background, so consumption
// continues while uploads run; every byte queued for an encoder or waiting
// for storage is in the budget, and the budget, not a blocked write, is what
// slows consumption when storage is slow.
//
// Concurrency: Write, Tick, Flush, Drop and Close may be called from
// different goroutines; they serialize on one mutex. File goroutines never
// take it.
package sink

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/spool"
	"github.com/spillway/spillway/internal/storage"
)

// Bucket is where files are committed. FromStorage adapts a
// *storage.Bucket.
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

// FromStorage is b as a Bucket.
func FromStorage(b *storage.Bucket) Bucket { return storageBucket{b} }

type storageBucket struct{ *storage.Bucket }

func (b storageBucket) NewWriter(ctx context.Context, key string, meta map[string]string) (Writer, error) {
	w, err := b.Bucket.NewWriter(ctx, key, meta)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Config is what the sink needs to know, already validated.
type Config struct {
	Template     *naming.Template
	Prefix       string
	Extension    string // ".jsonl.gz"
	MaxRecords   int64
	MaxBytes     int64
	MaxAge       time.Duration
	MaxOpenFiles int // 0 = derived from the budget
	// EventTime renders {{timestamp}} from each record's timestamp; else
	// from the wall clock when the record is written.
	EventTime bool
	// Ledger, when set, gets an entry before each file is published, for
	// partitions that were given an identity by Assign.
	Ledger *ledger.Ledger
	// Writer names this process in ledger entries, and Deployment its
	// configuration.
	Writer     string
	Deployment ledger.Deployment

	// NewEncoder and NewCompressor build a file's chain. CompressorMemory is
	// what one compressor plus encoder holds, for the budget.
	NewEncoder       func(w io.Writer) (format.Encoder, error)
	NewCompressor    func(w io.Writer) (io.WriteCloser, error)
	CompressorMemory int64
	// Schemas, when set, builds encoders instead of NewEncoder, and
	// rotates a file when a record's registry schemas change.
	Schemas Schemas

	// ErrRecord tells record errors (policy applies) from I/O errors (fatal).
	ErrRecord  error
	NullValues string // write | ignore | fail
	Tolerance  string // none | all
	// NewBufferedEncoder, when set, builds encoders instead of NewEncoder
	// (not with Schemas), for the formats that buffer blocks or row groups:
	// flushBytes is the block or row-group size, and grow is told of every
	// change in what the encoder buffers (format.Memory). FlushBytes is
	// flushBytes for open files, SlotFlushBytes for spooled files, which
	// encode in a slot once closed (budget.Plan.EncodeShare).
	NewBufferedEncoder         func(w io.Writer, flushBytes int64, grow func(delta int64)) (format.Encoder, error)
	FlushBytes, SlotFlushBytes int64

	// Spool, when set, stages the records of open files on local disk:
	// a file is encoded when it closes, EncodeSlots files at once (0:
	// GOMAXPROCS). See spool.go.
	Spool       *spool.Spool
	EncodeSlots int

	// DeadLetter, when set, receives records that cannot be written. It must
	// return only once the record is durable in the dead-letter topic.
	DeadLetter func(ctx context.Context, r *kgo.Record, cause error) error
	// OnClose, when set, is told of every file closed, with the sink's
	// lock held: it must only record, never block or call the sink.
	OnClose func(offsets.Closed)
}

// Stats are counters for progress and metrics.
type Stats struct {
	Records       int64 // records written to files (some may be dropped with their partition)
	Stored        int64 // records in files that were published
	Resumed       int64 // records skipped because storage held them already
	Skipped       int64 // records skipped by the error policy
	DeadLettered  int64
	FilesOpen     int
	FilesUploaded int64
	BytesUploaded int64
	Uploading     int64
	Closed        map[offsets.Reason]int64
	// SpoolFaults counts spool files that could not be created or
	// appended to, whose files were then written without the spool.
	SpoolFaults int64
	// SpoolWaiting counts closed spooled files waiting for room in the
	// memory budget to be encoded (see spool.go).
	SpoolWaiting int64
	// Lost counts offsets passed without being stored, by cause
	// (offsets.GapRetention): the log had deleted them first.
	Lost map[string]int64
}

// Sink writes records into files. Create it with New.
type Sink struct {
	cfg     Config
	bucket  Bucket
	budget  *budget.Budget
	tracker *offsets.Tracker
	log     *slog.Logger

	mu    sync.Mutex
	files map[fileID]*openFile
	// groups indexes files by partition, then group, so that finding a
	// record's file allocates nothing (m[string(bytes)] does not copy).
	groups map[offsets.TopicPartition]map[string]*openFile
	// groupBuf renders group names without allocating per record.
	groupBuf []byte
	stats    Stats
	// unaccounted counts records written but not yet told to the budget:
	// the budget takes a lock, so records are reported in batches, before
	// every look at it and before any file's records are taken back.
	unaccounted int64

	// touched are the files given records by the current Write, whose
	// pending batches it queues before it returns.
	touched []*openFile
	// finishing are files closed whose goroutine may still be finishing
	// them (see relieveLocked).
	finishing []*openFile
	// sizeWaits counts the poll side's waits for an exact file size near
	// max_bytes (sizeLocked).
	sizeWaits int64

	// Counters file goroutines update without s.mu.
	uploading, filesUploaded, bytesUploaded, storedRecords atomic.Int64
	// Records the error policy skipped or dead-lettered once their file's
	// goroutine found they could not be encoded.
	lateSkipped, lateDeadLettered atomic.Int64
	// inflight counts closed files until their upload ended; running
	// counts file goroutines.
	inflight, running sync.WaitGroup
	// fileMem is what an open file's encoder and writer are charged;
	// openCost what opening a file charges: fileMem, or with a spool
	// budget.SpoolFileCost.
	fileMem, openCost int64
	spooling          spooling
	chains            chains // finished files' encoders, for the next (reuse.go)

	// unpublished holds, per partition and in offset order, the closed files
	// whose upload has not ended. A file is published only after the one
	// before it: storage then always holds a gap-free run of a partition's
	// offsets, which is what resuming from the last stored file relies on.
	pubMu       sync.Mutex
	unpublished map[offsets.TopicPartition][]*openFile
	// failed marks the partitions one of whose uploads failed. None of
	// their later files may be published, not even one closed after the
	// failed file left the queue: a restart would resume after it and skip
	// the failed file's records.
	failed map[offsets.TopicPartition]bool
	// ledgered holds, per partition given by Assign, its identity and
	// the sequence number of its next ledger entry.
	ledgered map[offsets.TopicPartition]*ledgerPart

	errMu sync.Mutex
	err   error
	ctx   context.Context // ends uploads on hard stop
	stop  context.CancelFunc
}

// fileID names an open file: its partition and its group.
type fileID struct {
	tp    offsets.TopicPartition
	group string
}

// openFile is one file, open or being finished and published. Fields
// above "file goroutine" are the poll side's, under Sink.mu; w, comp, enc
// and gate belong to the file's goroutine once it runs.
type openFile struct {
	id       fileID
	tp       offsets.TopicPartition
	key      string
	w        Writer
	comp     io.WriteCloser
	enc      format.Encoder
	gate     *gate // between comp and w
	u        *offsets.Unit
	start    int64
	records  int64 // routed to the file, for rotation and the budget's count
	created  time.Time
	lastUsed time.Time
	schemas  string // see Schemas.Of

	// The queue to the file goroutine: pending is the batch being filled,
	// q the batches handed over. queuedIn is every byte handed over.
	q            chan batch
	pending      []*kgo.Record
	pendingBytes int64
	queuedIn     int64
	touched      bool // in Sink.touched
	lost         bool // a batch could not be handed over: never publish
	// The last exact reading of the file's size near max_bytes (see
	// sizeLocked): what it had written, of queuedIn bytes handed over,
	// at a ratio of exactRatio bytes out per byte in.
	exact, exactIn int64
	exactRatio     float64

	// File goroutine. written and consumed are its progress, for the poll
	// side's estimate of the file's size; encoded counts records in the
	// file; err is the first error, after which it encodes no more.
	written, consumed atomic.Int64
	encoded           int64
	err               error
	abandon           atomic.Bool   // dropped while open: store nothing
	finished          chan struct{} // closed once encoding ended and its memory is released

	// Set when the file is handed to storage.
	prev    *openFile     // the partition's previous file still uploading
	ended   chan struct{} // closed when the upload ended, either way
	durable bool          // read after ended is closed
	dropped atomic.Bool   // the partition was lost: don't publish
	// lp is the partition's ledger as it was when the file opened: a file
	// belongs to one ownership of its partition, and must not write an
	// entry for a later one.
	lp *ledgerPart

	// spooled: the file's records go to the spool (set when it opens).
	// The rest is its goroutine's (see spool.go): sf is its spool file,
	// nil once it went direct; spoolBytes what sf holds, read by the poll
	// side for relief; direct is set once its chain is open; charged once
	// its encoder and writer are charged in the budget; buffered is what
	// its encoder buffers (format.Memory.Grow).
	spooled bool
	// spoolCostMoved: closed, its SpoolFileCost was released for
	// ClosedFiles (before its queue was closed).
	spoolCostMoved bool
	sf             *spool.File
	spoolBytes     atomic.Int64
	direct         atomic.Bool
	charged        bool
	buffered       atomic.Int64
}

// New returns a sink. Close stops its goroutines.
func New(cfg Config, bucket Bucket, b *budget.Budget, log *slog.Logger) *Sink {
	ctx, stop := context.WithCancel(context.Background())
	s := &Sink{
		cfg: cfg, bucket: bucket, budget: b, tracker: offsets.NewTracker(), log: log,
		files:       map[fileID]*openFile{},
		groups:      map[offsets.TopicPartition]map[string]*openFile{},
		unpublished: map[offsets.TopicPartition][]*openFile{},
		failed:      map[offsets.TopicPartition]bool{},
		ledgered:    map[offsets.TopicPartition]*ledgerPart{},
		fileMem:     cfg.CompressorMemory + bucket.WriterMemory(),
		ctx:         ctx, stop: stop,
	}
	s.openCost = s.fileMem
	s.stats.Closed = map[offsets.Reason]int64{}
	if cfg.Spool != nil {
		s.openCost = budget.SpoolFileCost
		s.spooling.init(cfg.EncodeSlots)
		if s.cfg.MaxOpenFiles <= 0 {
			s.cfg.MaxOpenFiles = b.MaxSpooledFiles()
		}
	}
	if s.cfg.MaxOpenFiles <= 0 {
		// Each open file also fills one chunk, counted as it is used.
		s.cfg.MaxOpenFiles = b.MaxOpenFiles(s.fileMem + bucket.ChunkSize())
	}
	return s
}

// Assign starts a partition from where storage stands: offsets handled in
// st are never written again, and, with a ledger, each file's entry is
// written under id from sequence number seq on. Call it before the
// partition's first record.
func (s *Sink) Assign(tp offsets.TopicPartition, id ledger.Identity, p ledger.Point) {
	s.tracker.Assign(tp, p.State)
	s.pubMu.Lock()
	s.ledgered[tp] = &ledgerPart{id: id, seq: p.Seq}
	s.pubMu.Unlock()
}

// MaxOpenFiles is the effective cap on open files.
func (s *Sink) MaxOpenFiles() int { return s.cfg.MaxOpenFiles }

// Err is the first fatal error, if any. After it, Write refuses records.
func (s *Sink) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *Sink) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Stats returns a copy of the counters.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.FilesOpen = len(s.files)
	st.Uploading = s.uploading.Load()
	st.FilesUploaded = s.filesUploaded.Load()
	st.BytesUploaded = s.bytesUploaded.Load()
	st.Stored = s.storedRecords.Load()
	late := s.lateSkipped.Load()
	st.Records -= late
	st.Skipped += late
	st.DeadLettered += s.lateDeadLettered.Load()
	st.SpoolFaults = s.spooling.faults.Load()
	st.SpoolWaiting = s.spooling.waiting.Load()
	st.Lost = make(map[string]int64, len(s.stats.Lost))
	for k, v := range s.stats.Lost {
		st.Lost[k] = v
	}
	st.Closed = make(map[offsets.Reason]int64, len(s.stats.Closed))
	for k, v := range s.stats.Closed {
		st.Closed[k] = v
	}
	return st
}

// Flush closes the open files of the given partitions (all when tps is nil)
// and waits until they are durable.
func (s *Sink) Flush(ctx context.Context, tps map[offsets.TopicPartition]bool, why offsets.Reason) error {
	s.mu.Lock()
	for _, f := range s.filesLocked() {
		if tps == nil || tps[f.tp] {
			if err := s.closeLocked(ctx, f, why); err != nil {
				s.mu.Unlock()
				s.fail(err)
				return err
			}
		}
	}
	s.mu.Unlock()
	if tps == nil {
		done := make(chan struct{})
		go func() { s.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("wait for uploads: %w", ctx.Err())
		}
		s.dropChains() // nothing is open to take them
		return s.Err()
	}
	// Wait only for what exists now, not for files a later Write opens.
	if err := s.tracker.WaitDurable(ctx, s.tracker.PendingUnits(tps)); err != nil {
		return fmt.Errorf("wait for uploads: %w", err)
	}
	return s.Err()
}

// Committable pops what became durable: per partition, the offset to commit.
// only limits it to some partitions; nil means all.
func (s *Sink) Committable(only map[offsets.TopicPartition]bool) map[offsets.TopicPartition]int64 {
	return s.tracker.Committable(only)
}

// Durable returns a channel closed the next time a file becomes durable.
func (s *Sink) Durable() <-chan struct{} { return s.tracker.Wake() }

// Drop forgets partitions this instance no longer owns: open files are
// abandoned (their offsets were never committed, so nothing is lost) and
// their offsets are never committed.
func (s *Sink) Drop(tps map[offsets.TopicPartition]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, f := range s.files {
		if tps[id.tp] {
			s.forgetLocked(f)
			s.reportRecordsLocked()
			s.budget.AddRecords(-f.records)
			// The goroutine discards what it was given and aborts the
			// file; the pending batch was never counted.
			f.pending = nil
			f.abandon.Store(true)
			close(f.q)
		}
	}
	// Files of a lost partition that are not yet published stay
	// unpublished: the new owner resumes from what storage holds. They
	// leave the queue too, so that should the partition come back, its new
	// files don't wait on them.
	s.pubMu.Lock()
	for tp := range tps {
		for _, f := range s.unpublished[tp] {
			f.dropped.Store(true)
		}
		delete(s.unpublished, tp)
		delete(s.failed, tp)
		delete(s.ledgered, tp)
	}
	s.pubMu.Unlock()
	s.tracker.Drop(tps)
}

// Close abandons open files and stops the file goroutines. Call Flush
// first for a graceful stop.
func (s *Sink) Close() {
	s.mu.Lock()
	all := map[offsets.TopicPartition]bool{}
	for id := range s.files {
		all[id.tp] = true
	}
	s.mu.Unlock()
	s.Drop(all)
	s.stop()
	s.running.Wait()
	s.dropChains()
}
