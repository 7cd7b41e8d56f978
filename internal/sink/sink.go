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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/spool"
	"github.com/spillway/spillway/internal/storage"
)

// Encoder turns records into bytes on the writer it was made with. Close
// writes any trailer; it does not close that writer.
type Encoder interface {
	Encode(r *kgo.Record) error
	Close() error
}

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
	NewEncoder       func(w io.Writer) (Encoder, error)
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
	NewBufferedEncoder         func(w io.Writer, flushBytes int64, grow func(delta int64)) (Encoder, error)
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

// OpenFile describes a file being written, for OpenFiles.
type OpenFile struct {
	Key       string
	Partition offsets.TopicPartition
	Records   int64
	Opened    time.Time
}

// OpenFiles lists the files being written, for status pages.
func (s *Sink) OpenFiles() []OpenFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]OpenFile, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, OpenFile{Key: f.key, Partition: f.tp, Records: f.records, Opened: f.created})
	}
	return out
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

type ledgerPart struct {
	id  ledger.Identity
	seq int64
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
	enc      Encoder
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

// LogStart tells the sink where a partition's log starts, as a fetch that
// returned records from first on said. Offsets from where the partition
// stands up to the log start (or first, if lower) were deleted before
// Spillway stored them: retention, DeleteRecords, or an unclean leader
// election. They are recorded as a gap in the ledger entry of the
// partition's next file, logged at ERROR and counted, never passed
// silently. The poll loop calls it, before it writes the fetch's records.
func (s *Sink) LogStart(tp offsets.TopicPartition, logStart, first int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := s.tracker.Lose(tp, min(logStart, first), offsets.GapRetention)
	if len(lost) == 0 {
		return
	}
	if s.stats.Lost == nil {
		s.stats.Lost = map[string]int64{}
	}
	s.stats.Lost[offsets.GapRetention] += lost.Count()
	s.log.Error("records were deleted from the log before Spillway stored them: they are lost; the ledger records the gap and verify reports it",
		"topic", tp.Topic, "partition", tp.Partition, "offsets", offsets.FormatRanges(lost), "count", lost.Count(),
		"cause", "retention, DeleteRecords or an unclean leader election moved the log start to "+strconv.FormatInt(logStart, 10),
		"fix", "keep the topic's retention above the longest time Spillway may be down or behind")
}

// Write routes records to their files. Records must arrive in offset order
// per partition, as a Kafka consumer gives them.
func (s *Sink) Write(ctx context.Context, recs []*kgo.Record) error {
	_, err := s.write(ctx, recs, false)
	return err
}

// WriteSome is Write for a consumer that can wait: it stops early, and says
// how many records it took, when the budget stays full after one relief.
// The caller then waits for the budget and passes the rest. Going on would
// not free anything: once the larger files are closed, what holds the
// budget is storage being behind, and every file a later record reopens
// only adds a writer's memory.
func (s *Sink) WriteSome(ctx context.Context, recs []*kgo.Record) (int, error) {
	return s.write(ctx, recs, true)
}

func (s *Sink) write(ctx context.Context, recs []*kgo.Record, some bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.writeLocked(ctx, recs, some)
	if herr := s.handOverTouchedLocked(ctx); herr != nil && err == nil {
		s.fail(herr)
		err = herr
	}
	return n, err
}

func (s *Sink) writeLocked(ctx context.Context, recs []*kgo.Record, some bool) (int, error) {
	if err := s.Err(); err != nil {
		return 0, err
	}
	relieved := false
	// full: the budget is over its high watermark or, when a file is to be
	// opened, has no room for one. Opening charges a whole writer (5 parts
	// on S3), so the watermark alone would let the budget pass its limit.
	full := func(opening bool) bool {
		return s.overLocked() || opening && !s.budget.HasRoom(s.openCost)
	}
	// relieve closes the larger files once; it reports whether to stop.
	relieve := func(opening bool) (bool, error) {
		if some && relieved {
			return true, nil
		}
		relieved = true
		if err := s.relieveLocked(ctx); err != nil {
			s.fail(err)
			return true, err
		}
		return some && full(opening), nil
	}
	roomFor := func() bool { return !full(true) }
	if !some {
		roomFor = nil
	}
	now := time.Now()
	for i, r := range recs {
		err := s.writeOne(ctx, r, now, roomFor)
		if errors.Is(err, errNoRoom) {
			if stop, err := relieve(true); stop || err != nil {
				return i, err
			}
			err = s.writeOne(ctx, r, now, nil)
		}
		if err != nil {
			s.fail(err)
			return i, err
		}
		// A poll can return thousands of records: look at the budget within
		// the batch too, cheaply, and at once after a big record.
		if (i%64 == 63 || len(r.Value) >= 64<<10) && s.overLocked() {
			if stop, err := relieve(false); stop || err != nil {
				return i + 1, err
			}
		}
	}
	if s.overLocked() && !(some && relieved) {
		if _, err := relieve(false); err != nil {
			return len(recs), err
		}
	}
	return len(recs), nil
}

// errNoRoom: a file was to be opened and the budget has no room for it.
var errNoRoom = errors.New("no room in the budget for another file")

// writeOne writes one record. roomFor, when set, is asked before a file is
// opened; if it says no, writeOne returns errNoRoom and writes nothing.
func (s *Sink) writeOne(ctx context.Context, r *kgo.Record, now time.Time, roomFor func() bool) error {
	tp := offsets.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	if s.tracker.Has(tp, r.Offset) {
		// Stored before this process resumed the partition.
		s.tracker.Route(tp, r.Offset, nil)
		s.stats.Resumed++
		return nil
	}
	if r.Value == nil {
		switch s.cfg.NullValues {
		case "ignore":
			return s.skip(ctx, tp, r, nil)
		case "fail":
			return s.recordError(ctx, tp, r, fmt.Errorf("record %s/%d@%d has a null value and errors.null_values is fail", r.Topic, r.Partition, r.Offset))
		}
	}
	f, err := s.fileFor(ctx, tp, r, now, roomFor)
	if err != nil {
		return err
	}
	// Routed now, in poll order; the file goroutine encodes it later and,
	// should the record turn out not to be writable, hands its offset back
	// to the error policy (skipLate).
	s.tracker.Route(tp, r.Offset, f.u)
	f.records++
	f.lastUsed = now
	s.stats.Records++
	s.unaccounted++
	if err := s.enqueueLocked(ctx, f, r); err != nil {
		return err
	}
	if s.cfg.MaxRecords > 0 && f.records >= s.cfg.MaxRecords {
		return s.closeLocked(ctx, f, offsets.ReasonRecords)
	}
	if s.cfg.MaxBytes > 0 {
		n, err := s.sizeLocked(ctx, f, s.cfg.MaxBytes)
		if err != nil {
			return err
		}
		if n >= s.cfg.MaxBytes {
			return s.closeLocked(ctx, f, offsets.ReasonBytes)
		}
	}
	return nil
}

// overLocked reports the records written so far, then asks the budget.
func (s *Sink) overLocked() bool {
	s.reportRecordsLocked()
	return s.budget.Over()
}

func (s *Sink) reportRecordsLocked() {
	if s.unaccounted != 0 {
		s.budget.AddRecords(s.unaccounted)
		s.unaccounted = 0
	}
}

// recordError applies the error policy to one record.
func (s *Sink) recordError(ctx context.Context, tp offsets.TopicPartition, r *kgo.Record, cause error) error {
	dead, err := s.policy(ctx, r, cause)
	if err != nil {
		return err
	}
	if dead {
		s.stats.DeadLettered++
	}
	return s.skip(ctx, tp, r, cause)
}

// policy sends r to the dead-letter topic (dead) or, if the policy
// tolerates it, logs it; otherwise it returns the error that stops the sink.
// The caller then accounts r as handled.
func (s *Sink) policy(ctx context.Context, r *kgo.Record, cause error) (dead bool, err error) {
	out, err := errpolicy.Policy{Tolerance: s.cfg.Tolerance, DeadLetter: s.cfg.DeadLetter, Log: s.log}.Apply(ctx, r, cause)
	return out == errpolicy.DeadLettered, err
}

// skip accounts for a record that is handled without being stored, so its
// offset can still be committed.
func (s *Sink) skip(_ context.Context, tp offsets.TopicPartition, r *kgo.Record, _ error) error {
	s.stats.Skipped++
	s.tracker.Route(tp, r.Offset, nil)
	return nil
}

// vars are the template values of a record, for its group and its file's
// name.
func (s *Sink) vars(r *kgo.Record, now time.Time) naming.Vars {
	t := now
	if s.cfg.EventTime {
		t = r.Timestamp
	}
	// r.Key as it is: a copy would turn an empty key into a null one.
	return naming.Vars{Topic: r.Topic, Partition: r.Partition, StartOffset: r.Offset, Time: t, Key: r.Key}
}

func (s *Sink) fileFor(ctx context.Context, tp offsets.TopicPartition, r *kgo.Record, now time.Time, roomFor func() bool) (*openFile, error) {
	v := s.vars(r, now)
	s.groupBuf = s.groupBuf[:0]
	if s.cfg.Template.SplitsPartition() {
		s.groupBuf = s.cfg.Template.AppendGroup(s.groupBuf, v)
	}
	if f := s.groups[tp][string(s.groupBuf)]; f != nil {
		if !s.schemaChanged(f, r) {
			return f, nil
		}
		if err := s.closeLocked(ctx, f, offsets.ReasonSchema); err != nil {
			return nil, err
		}
	}
	id := fileID{tp, string(s.groupBuf)}
	if roomFor != nil && !roomFor() {
		return nil, errNoRoom
	}
	if len(s.files) >= s.cfg.MaxOpenFiles {
		if err := s.closeLocked(ctx, s.leastRecentLocked(), offsets.ReasonOpenFiles); err != nil {
			return nil, err
		}
	}
	key := s.cfg.Prefix + s.cfg.Template.Render(v) + s.cfg.Extension
	s.pubMu.Lock()
	lp := s.ledgered[tp]
	s.pubMu.Unlock()
	// The file's goroutine opens its writer and encoder (see open): a
	// local bucket creates a file, which the poll loop need not wait for.
	f := &openFile{id: id, tp: tp, key: key, start: r.Offset,
		created: now, lastUsed: now, u: &offsets.Unit{}, lp: lp, q: make(chan batch, fileQueueBatches), finished: make(chan struct{}),
		schemas: s.schemasOf(r), spooled: s.cfg.Spool != nil}
	if f.spooled {
		// Its encoder and writer are charged when it goes direct.
		s.budget.Acquire(budget.SpoolFiles, budget.SpoolFileCost)
	} else {
		s.chargeChain(f)
	}
	s.running.Add(1)
	go s.run(f)
	s.files[id] = f
	if s.groups[tp] == nil {
		s.groups[tp] = map[string]*openFile{}
	}
	s.groups[tp][id.group] = f
	return f, nil
}

// forgetLocked takes f out of the open files.
func (s *Sink) forgetLocked(f *openFile) {
	delete(s.files, f.id)
	if g := s.groups[f.tp]; g != nil {
		delete(g, f.id.group)
		if len(g) == 0 {
			delete(s.groups, f.tp)
		}
	}
}

func (s *Sink) leastRecentLocked() *openFile {
	var lru *openFile
	for _, f := range s.files {
		if lru == nil || f.lastUsed.Before(lru.lastUsed) {
			lru = f
		}
	}
	return lru
}

// pendingCost is what a closed file waiting for storage holds besides its
// part buffers (counted by storage) and its writer: its goroutine and state.
const pendingCost = 16 << 10

// closeLocked hands a file's last batch to its goroutine, which finishes
// the encoding and hands the file to storage in the background. It waits
// neither for the encoder nor for storage: what the file still holds stays
// counted in the budget, and the budget is what slows consumption. The
// file takes its place in its partition's publication order now.
func (s *Sink) closeLocked(ctx context.Context, f *openFile, why offsets.Reason) error {
	s.forgetLocked(f)
	s.stats.Closed[why]++
	if s.cfg.OnClose != nil {
		s.cfg.OnClose(offsets.Closed{Key: f.key, Partition: f.tp, Reason: why, Records: f.records})
	}
	s.reportRecordsLocked()
	s.budget.AddRecords(-f.records)
	err := s.handOverLocked(ctx, f)
	if err != nil || f.lost {
		// Its records never all reached the encoder: never publish it.
		f.abandon.Store(true)
		close(f.q)
		if err == nil {
			err = fmt.Errorf("finish %s: a batch of its records was not encoded", f.key)
		}
		return err
	}
	// The writer keeps its buffers until the commit ends.
	s.budget.Acquire(budget.ClosedFiles, pendingCost)
	if f.spooled {
		// pendingCost counts its goroutine and state from now on.
		s.budget.Release(budget.SpoolFiles, budget.SpoolFileCost)
		f.spoolCostMoved = true
	}
	s.inflight.Add(1)
	s.uploading.Add(1)
	s.log.Debug("file closed", "key", f.key, "reason", why, "records", f.records)
	f.ended = make(chan struct{})
	s.pubMu.Lock()
	q := s.unpublished[f.tp]
	if len(q) > 0 {
		f.prev = q[len(q)-1]
	}
	s.unpublished[f.tp] = append(q, f)
	s.pubMu.Unlock()
	close(f.q) // the goroutine finishes the file, then uploads it
	if !f.spooled || f.direct.Load() {
		// Not a spooled file: it waits for an encode slot and for room
		// in the budget, which may be what the caller's relief is
		// waiting for (see spool.go).
		s.addFinishingLocked(f)
	}
	return nil
}

// upload streams the rest of a closed file and publishes it once the
// partition's previous file is published. Parts keep streaming while it
// waits; only the final step (the link, or completing the multipart upload)
// is ordered. Should the previous file fail, this one is abandoned, so a
// crash can never leave a later file stored after a missing one. It runs
// on the file's goroutine, after finish; err is finish's.
func (s *Sink) upload(f *openFile, err error) {
	defer s.inflight.Done()
	defer s.ended(f)
	defer func() {
		s.budget.Release(budget.ClosedFiles, pendingCost)
		if f.charged {
			s.budget.Release(budget.WriterBuffers, s.bucket.WriterMemory())
		}
		// Not s.mu: a writer holding s.mu may be waiting on the budget.
		s.uploading.Add(-1)
	}()
	failUpload := func(err error) {
		// Before this file leaves the queue (deferred), so that no later
		// file of the partition can miss it.
		s.pubMu.Lock()
		s.failed[f.tp] = true
		s.pubMu.Unlock()
		err = fmt.Errorf("%s/%d: %w", f.tp.Topic, f.tp.Partition, err)
		s.fail(err)
		s.tracker.Fail(err)
	}
	if err != nil {
		if f.w != nil {
			f.w.Abort()
		}
		failUpload(err)
		return
	}
	if f.prev != nil {
		select {
		case <-f.prev.ended:
			if !f.prev.durable {
				// It failed (and that was reported) or was dropped.
				f.w.Abort()
				return
			}
		case <-s.ctx.Done():
			f.w.Abort()
			return
		}
	}
	s.pubMu.Lock()
	failed := s.failed[f.tp]
	s.pubMu.Unlock()
	if f.dropped.Load() || failed {
		f.w.Abort()
		return
	}
	if f.encoded == 0 {
		// Every record of this file was skipped by the error policy: store
		// nothing, but let its offsets be committed; a gap it adopted
		// still needs its entry.
		f.w.Abort()
		if len(s.tracker.Gaps(f.u)) > 0 {
			if err := s.writeEntry(f, 0, 0); err != nil {
				if !errors.Is(err, errLostOwnership) {
					failUpload(err)
				}
				return
			}
		}
		f.durable = true
		s.tracker.MarkDurable(f.u)
		return
	}
	n := f.w.Written()
	if err := s.writeEntry(f, n, f.w.CRC32C()); err != nil {
		f.w.Abort()
		if errors.Is(err, errLostOwnership) {
			return
		}
		failUpload(err)
		return
	}
	if err := f.w.Commit(); err != nil {
		if errors.Is(err, storage.ErrExists) {
			// Create-only writes are the fence between writers; and a
			// file Spillway did not write is never overwritten.
			err = fmt.Errorf("%w: Spillway never overwrites a file. Either another instance owns the partition now (this one lost it, and a restart resumes from the ledger), or the file is not this topic's (left by an older topic of the same name, or copied in): then move it out of storage.prefix", err)
		}
		failUpload(err)
		return
	}
	f.durable = true
	s.filesUploaded.Add(1)
	s.bytesUploaded.Add(n)
	s.storedRecords.Add(f.encoded)
	s.tracker.MarkDurable(f.u)
}

// errLostOwnership: the file's partition was dropped before its entry.
var errLostOwnership = errors.New("the partition was dropped before the file was published")

// writeEntry writes the ledger entry of f, whose size is n and checksum
// sum, before f is published: the partition's state with every earlier
// file published, and f's own runs. Every byte of f is written (staged,
// not visible) by now, so both are f's as it will be stored. Entries of a
// partition are written one at a time, in the order its files are
// published.
func (s *Sink) writeEntry(f *openFile, n int64, sum uint32) error {
	if s.cfg.Ledger == nil {
		return nil
	}
	lp := f.lp
	if lp == nil {
		return nil
	}
	s.pubMu.Lock()
	owned := s.ledgered[f.tp] == lp
	s.pubMu.Unlock()
	if !owned {
		// Lost, and maybe given back since: this file is of the earlier
		// ownership, whose state the tracker no longer holds.
		return errLostOwnership
	}
	e := &ledger.Entry{
		Cluster: lp.id.Cluster, Topic: lp.id.Topic, TopicID: lp.id.TopicID, Partition: lp.id.Partition,
		Seq: lp.seq, Writer: s.cfg.Writer, Deployment: s.cfg.Deployment, Time: time.Now().UTC(),
		Before: s.tracker.State(f.tp),
		File:   ledger.FileInfo{Key: f.key, Ranges: s.tracker.Ranges(f.u), Records: f.encoded, Bytes: n, CRC32C: ledger.FormatCRC32C(sum)},
		Gaps:   s.tracker.Gaps(f.u),
	}
	if f.encoded == 0 {
		// Only its gaps are recorded: nothing is published.
		e.File = ledger.FileInfo{}
	}
	if err := s.cfg.Ledger.Append(s.ctx, e); err != nil {
		if errors.Is(err, storage.ErrExists) {
			if other, rerr := s.cfg.Ledger.Read(s.ctx, lp.id, s.cfg.Ledger.EntryKey(lp.id, e.Seq)); rerr == nil && other.Group != "" && e.Group != "" && other.Group != e.Group {
				return fmt.Errorf("ledger entry %d of %s/%d: %w: another deployment, kafka.group %q (%s), wrote it first: two deployments write into this prefix, and they fence each other off. Give each its own storage.prefix",
					e.Seq, lp.id.Topic, lp.id.Partition, err, other.Group, other.Writer)
			}
			return fmt.Errorf("ledger entry %d: %w: another instance wrote it first, so it owns the partition now; this one stops, and a restart resumes from the ledger", e.Seq, err)
		}
		return fmt.Errorf("ledger entry %d: %w", e.Seq, err)
	}
	s.pubMu.Lock()
	lp.seq++
	s.pubMu.Unlock()
	return nil
}

// ended takes a file whose upload is over off its partition's queue and
// lets the next file go on.
func (s *Sink) ended(f *openFile) {
	s.pubMu.Lock()
	q := s.unpublished[f.tp]
	for i, g := range q {
		if g == f {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.unpublished, f.tp)
	} else {
		s.unpublished[f.tp] = q
	}
	s.pubMu.Unlock()
	close(f.ended)
}

// Relieve closes files while no upload is in flight, down to the low
// watermarks (see relieveLocked); with uploads in flight it does nothing:
// they free memory as they end, and the caller waits for them.
func (s *Sink) Relieve(ctx context.Context) error {
	if s.uploading.Load() != 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.relieveLocked(ctx); err != nil {
		s.fail(err)
		return err
	}
	return nil
}

// relieveLocked closes the largest open files until the budget would be
// back under its watermarks (see idle below). Files are finished by their goroutines:
// it first waits for those closed already, whose memory is about to be
// released, and for each file it closes, so that it closes no more than
// needed.
func (s *Sink) relieveLocked(ctx context.Context) error {
	s.awaitFinishingLocked(ctx)
	s.dropChains()
	// Which files to close depends on what is short. Disk: those with the
	// most spooled. Memory: those that hold the most of it, and with a
	// spool only those written without it: a spooled file holds next to
	// nothing, and closing it would take an encode slot's memory.
	// The record count (max_buffered_records): those with the most
	// records, spooled or not.
	overDisk, overMem, overRecs := s.budget.OverDisk(), s.budget.OverMemory(), s.budget.OverRecords()
	if !overDisk && !overMem {
		overMem = true // a file is to open and memory has no room for it
	}
	// With no closed file in flight, no upload will free anything (an open
	// file's queued part waits for more of its records), and the
	// fetch stays paused until both resources are below their low
	// watermarks: close files down to them, or the fetch waits for
	// file.max_age to close them. With uploads in flight, close down to the
	// high watermarks only: when storage is behind, closing more would
	// only make small files. Either way, close the larger half at most.
	idle := s.uploading.Load() == 0
	files := make([]*openFile, 0, len(s.files))
	for _, f := range s.files {
		if overDisk || overRecs || !f.spooled || f.direct.Load() {
			files = append(files, f)
		}
	}
	weight := func(f *openFile) int64 { return f.memory() }
	switch {
	case overDisk:
		weight = func(f *openFile) int64 { return f.spoolBytes.Load() }
	case overRecs:
		weight = func(f *openFile) int64 { return f.records }
	}
	sort.Slice(files, func(i, j int) bool {
		if wi, wj := weight(files[i]), weight(files[j]); wi != wj {
			return wi > wj
		}
		return files[i].size() > files[j].size()
	})
	still := func() bool {
		if idle {
			return overDisk && !s.budget.DiskLow() || overMem && !s.budget.MemoryLow()
		}
		return overDisk && s.budget.OverDisk() || overMem && s.budget.OverMemory()
	}
	for i, f := range files {
		if !still() || i >= (len(files)+1)/2 {
			break
		}
		if err := s.closeLocked(ctx, f, offsets.ReasonPressure); err != nil {
			return err
		}
		s.awaitFinishingLocked(ctx)
	}
	return nil
}

// Tick closes files older than max_age, including files of partitions that
// went idle.
func (s *Sink) Tick(ctx context.Context, now time.Time) error {
	if s.cfg.MaxAge <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.filesLocked() {
		if now.Sub(f.created) >= s.cfg.MaxAge {
			if err := s.closeLocked(ctx, f, offsets.ReasonAge); err != nil {
				s.fail(err)
				return err
			}
		}
	}
	return nil
}

// filesLocked returns open files in a stable order.
func (s *Sink) filesLocked() []*openFile {
	out := make([]*openFile, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].tp.Topic != out[j].tp.Topic {
			return out[i].tp.Topic < out[j].tp.Topic
		}
		if out[i].tp.Partition != out[j].tp.Partition {
			return out[i].tp.Partition < out[j].tp.Partition
		}
		return out[i].start < out[j].start
	})
	return out
}

// RunTicker calls Tick until ctx ends.
func (s *Sink) RunTicker(ctx context.Context) { RunTicks(ctx, s.cfg.MaxAge, s.Tick) }

// RunTicks calls tick until ctx ends or tick fails: every second, or four
// times per maxAge when that is shorter, so a file is closed at most a
// quarter of maxAge late.
func RunTicks(ctx context.Context, maxAge time.Duration, tick func(context.Context, time.Time) error) {
	every := time.Second
	if maxAge > 0 && maxAge/4 < every {
		every = maxAge / 4
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if err := tick(ctx, now); err != nil {
				return
			}
		}
	}
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
