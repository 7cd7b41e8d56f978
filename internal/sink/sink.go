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
// Concurrency: the code is split by the goroutine or lock that owns it,
// and each function says which it runs on. The folders follow the records:
//
//   - this package, the poll side: Write, WriteSome, Tick, Relieve and the
//     rotations (router.go), with the router's mutex held (Sink.mu).
//     Flush, Drop, Close, Stats and OpenFiles, called from other goroutines
//     (rebalance callbacks, the ticker, the status page), take it too, so
//     all of them serialize. pipeline.go is the queue the poll side fills.
//   - filewriter, one goroutine per file: it encodes, finishes and uploads
//     the file, through gate to storage, reusing chains (reuse) and, with
//     a spool, in encode slots (spooling). File goroutines never take
//     Sink.mu, so the poll side may wait for one with it held.
//   - publish, under its own mutex: the order in which a partition's
//     files are published, and their ledger entries.
//
// source.Writer says which of the source's goroutines calls what.
package sink

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink/filewriter"
	"github.com/spillway/spillway/internal/sink/publish"
	"github.com/spillway/spillway/internal/sink/reuse"
	"github.com/spillway/spillway/internal/sink/spooling"
	"github.com/spillway/spillway/internal/spool"
	"github.com/spillway/spillway/internal/storage"
)

// Bucket is where files are committed (filewriter.Bucket). FromStorage
// adapts a *storage.Bucket.
type Bucket = filewriter.Bucket

// Writer streams one file to storage (filewriter.Writer).
type Writer = filewriter.Writer

// FromStorage is b as a Bucket.
func FromStorage(b *storage.Bucket) Bucket { return storageBucket{b} }

type storageBucket struct{ *storage.Bucket }

// NewWriter is the file goroutine's, as Bucket.NewWriter is.
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
	// Fields reads the value fields the template splits files by
	// ({{value_field}}); it is needed when the template has any.
	Fields FieldReader

	// ErrRecord tells record errors (Policy applies) from I/O errors (fatal).
	ErrRecord  error
	NullValues string // write | ignore | fail
	// Policy decides about a record that can't be written: skip it, send
	// it to the dead-letter topic, or stop. Its Log, when nil, is the
	// sink's.
	Policy errpolicy.Policy
	// NewBufferedEncoder, when set, builds encoders instead of NewEncoder
	// (not with Schemas), for the formats that buffer blocks or row groups:
	// flushBytes is the block or row-group size, and grow is told of every
	// change in what the encoder buffers (format.Memory). FlushBytes is
	// flushBytes for open files, SlotFlushBytes for spooled files, which
	// encode in a slot once closed (budget.Plan.EncodeShare).
	NewBufferedEncoder         func(w io.Writer, flushBytes int64, grow func(delta int64)) (format.Encoder, error)
	FlushBytes, SlotFlushBytes int64
	// QueueBatches is how many batches an open file's queue holds
	// (budget.Plan.QueueBatches); 0 or a spool: budget.MinQueueBatches.
	QueueBatches int

	// Spool, when set, stages the records of open files on local disk:
	// a file is encoded when it closes, EncodeSlots files at once (0:
	// GOMAXPROCS). See package filewriter.
	Spool       *spool.Spool
	EncodeSlots int

	// OnClose, when set, is told of every file closed, with the sink's
	// lock held: it must only record, never block or call the sink.
	OnClose func(offsets.Closed)

	// Published, when set with a Ledger, is told of every data file once
	// it is stored and its ledger entry written, with the entry: a
	// partition's files in order, from the file's goroutine, with no lock
	// held. It must only record, never block or call the sink (package
	// tables queues the files for its commits).
	Published func(offsets.TopicPartition, ledger.Entry)
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
	// memory budget to be encoded (see spooling.State.WaitRoom).
	SpoolWaiting int64
	// Lost counts offsets passed without being stored, by cause
	// (offsets.GapRetention): the log had deleted them first.
	Lost map[string]int64
}

// Sink writes records into files. Create it with New.
//
// Its state is split by owner, as the work is (see the package doc):
// router is the poll side's, under router.mu; each file's goroutine owns
// its filewriter.File; pub, the publication order, has a lock of its own. What any goroutine may touch is set by New and read-only after, or
// synchronizes itself (tracker, budget, writers, spooling, chains, pub). Lock order: router.mu, then pub's lock or errMu; a file goroutine
// never takes router.mu.
type Sink struct {
	// Set by New, then read-only.
	cfg     Config
	bucket  Bucket
	budget  *budget.Budget
	tracker *offsets.Tracker // safe for concurrent use
	log     *slog.Logger
	// fileMem is what an open file's encoder and writer are charged;
	// openCost what opening a file charges: fileMem, or with a spool
	// budget.SpoolFileCost.
	fileMem, openCost int64
	ctx               context.Context // ends uploads on hard stop
	stop              context.CancelFunc

	router // the poll side (router.go)

	writers  *filewriter.Shared // what the file goroutines share
	spooling *spooling.State    // the spool's side; nil without a spool
	chains   *reuse.Chains      // finished files' encoders, for the next

	pub *publish.Order // publication order and the ledger entries

	errMu sync.Mutex
	err   error
}

// fileID names an open file: its partition and its group.
type fileID struct {
	tp    offsets.TopicPartition
	group string
}

// openFile is one file as the poll side sees it: routeState is the poll
// side's, under Sink.mu (router.go); fw is the file's goroutine and the
// state it owns (package filewriter), which holds its place in the
// publication order (package publish). The other fields are set by
// fileFor and never change.
type openFile struct {
	id      fileID
	tp      offsets.TopicPartition
	key     string
	start   int64
	created time.Time
	schemas string        // see Schemas.Of
	u       *offsets.Unit // the file's offsets in the tracker
	// fw is the file's goroutine and its state (package filewriter),
	// started by fileFor.
	fw *filewriter.File

	routeState
}

// New returns a sink. Close stops its goroutines.
func New(cfg Config, bucket Bucket, b *budget.Budget, log *slog.Logger) *Sink {
	ctx, stop := context.WithCancel(context.Background())
	tracker := offsets.NewTracker()
	s := &Sink{
		cfg: cfg, bucket: bucket, budget: b, tracker: tracker, log: log,
		pub: publish.New(cfg.Ledger, cfg.Writer, cfg.Deployment, tracker),
		router: router{
			files:  map[fileID]*openFile{},
			groups: map[offsets.TopicPartition]map[string]*openFile{},
		},
		chains:  reuse.New(b, cfg.CompressorMemory),
		fileMem: cfg.CompressorMemory + bucket.WriterMemory(),
		ctx:     ctx, stop: stop,
	}
	if s.cfg.Policy.Log == nil {
		s.cfg.Policy.Log = log
	}
	s.openCost = s.fileMem
	s.stats.Closed = map[offsets.Reason]int64{}
	if s.cfg.QueueBatches <= 0 || cfg.Spool != nil {
		// A spooled file's queue drains to disk, and its channel is
		// part of SpoolFileCost.
		s.cfg.QueueBatches = budget.MinQueueBatches
	}
	if cfg.Spool != nil {
		s.openCost = budget.SpoolFileCost
		s.spooling = spooling.New(cfg.EncodeSlots, log)
		if s.cfg.MaxOpenFiles <= 0 {
			s.cfg.MaxOpenFiles = b.MaxSpooledFiles()
		}
	}
	s.writers = filewriter.New(ctx, filewriter.Config{
		NewEncoder: cfg.NewEncoder, NewCompressor: cfg.NewCompressor, CompressorMemory: cfg.CompressorMemory,
		Schemas: cfg.Schemas, NewBufferedEncoder: cfg.NewBufferedEncoder,
		FlushBytes: cfg.FlushBytes, SlotFlushBytes: cfg.SlotFlushBytes,
		ErrRecord: cfg.ErrRecord, Policy: s.cfg.Policy, Spool: cfg.Spool, Spooling: s.spooling, Published: cfg.Published,
		Bucket: bucket, Budget: b, Tracker: tracker, Log: log, Chains: s.chains, Order: s.pub, Fail: s.fail,
	})
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
// A rebalance callback (onAssigned) calls it, router.mu not held; it takes
// pub.mu.
func (s *Sink) Assign(tp offsets.TopicPartition, id ledger.Identity, p ledger.Point) {
	s.tracker.Assign(tp, p.State)
	s.pub.Assign(tp, id, p.Seq)
}

// MaxOpenFiles is the effective cap on open files.
// Any goroutine: it is set by New.
func (s *Sink) MaxOpenFiles() int { return s.cfg.MaxOpenFiles }

// Err is the first fatal error, if any. After it, Write refuses records.
// Any goroutine; it takes errMu.
func (s *Sink) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// fail keeps err if it is the first fatal error. Any goroutine, router.mu
// held or not; it takes errMu.
func (s *Sink) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Stats returns a copy of the counters.
// Any goroutine (status page, monitor); it takes router.mu.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.FilesOpen = len(s.files)
	c := s.writers.Counts()
	st.Uploading = c.Uploading
	st.FilesUploaded = c.FilesUploaded
	st.BytesUploaded = c.BytesUploaded
	st.Stored = c.Stored
	st.Records -= c.LateSkipped
	st.Skipped += c.LateSkipped
	st.DeadLettered += c.LateDeadLettered
	if s.spooling != nil {
		st.SpoolFaults = s.spooling.Faults()
		st.SpoolWaiting = s.spooling.Waiting()
	}
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
// A rebalance callback (onRevoked) or Shutdown calls it; it takes
// router.mu to close the files, and waits for them without it.
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
		if err := s.writers.WaitUploads(ctx); err != nil {
			return fmt.Errorf("wait for uploads: %w", err)
		}
		s.chains.Drop() // nothing is open to take them
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
// The commit loop, onRevoked and Shutdown call it; it takes the tracker's
// lock only.
func (s *Sink) Committable(only map[offsets.TopicPartition]bool) map[offsets.TopicPartition]int64 {
	return s.tracker.Committable(only)
}

// Durable returns a channel closed the next time a file becomes durable.
// The commit loop calls it; it takes the tracker's lock only.
func (s *Sink) Durable() <-chan struct{} { return s.tracker.Wake() }

// Drop forgets partitions this instance no longer owns: open files are
// abandoned (their offsets were never committed, so nothing is lost) and
// their offsets are never committed.
// A rebalance callback (onRevoked, onLost) or Close calls it; it takes
// router.mu, then pub.mu.
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
			f.fw.Abandon()
		}
	}
	// Their closed files not yet published never are (Order.Drop).
	s.pub.Drop(tps)
	s.tracker.Drop(tps)
}

// Close abandons open files and stops the file goroutines. Call Flush
// first for a graceful stop.
// The runner calls it once the source has returned; it takes router.mu,
// then waits for the file goroutines without it.
func (s *Sink) Close() {
	s.mu.Lock()
	all := map[offsets.TopicPartition]bool{}
	for id := range s.files {
		all[id.tp] = true
	}
	s.mu.Unlock()
	s.Drop(all)
	s.stop()
	s.writers.Wait()
	s.chains.Drop()
}
