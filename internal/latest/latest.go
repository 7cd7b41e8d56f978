// Package latest writes the "latest value per key" layout of Aiven's sinks:
// a file name template with {{key}} and no {{start_offset}} names one object
// per key, and each flush replaces that object with the key's latest record.
//
// Delivery is at-least-once with an idempotent result, not exactly-once:
//
//   - Records are held, one per object name, until a flush; a later record
//     of the same name replaces the one held, so superseded values are never
//     written.
//   - A flush writes every held object (storage.Bucket.Replace), and only
//     when all are stored do the partitions' offsets become committable, up
//     to the last record consumed before the flush began. A crash before the
//     commit re-reads those records and writes the same objects again,
//     which leaves storage as it was.
//   - Flushes run one at a time, so an older value is never written after a
//     newer one by this process. Objects are replaced, not created, so
//     fencing doesn't reach them: a paused former owner of a partition may
//     still write a value the new owner has already replaced. Its next
//     flush of that key puts the newest back.
//
// No resume ledger is written: every object is rewritten from the committed
// offset on, so where storage stands doesn't matter. See docs/design.md.
package latest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
)

// Store is where objects are replaced. owner names the partition that
// writes key ("topic/partition"): the names of this layout don't, so the
// store keeps it with an unfinished write, and RemoveAbandonedOwned finds
// what a writer that died mid-write left for a partition (a local
// directory's temp files).
type Store interface {
	ReplaceOwned(ctx context.Context, key, owner string, data []byte, meta map[string]string) error
	RemoveAbandonedOwned(ctx context.Context, prefix string, owners []string) error
}

// owner is how a partition is named to Store.
func owner(tp offsets.TopicPartition) string {
	return tp.Topic + "/" + strconv.Itoa(int(tp.Partition))
}

// Config is what the writer needs, already validated.
type Config struct {
	Template  *naming.Template // LatestPerKey
	Prefix    string
	Extension string
	// MaxAge bounds how long a record waits for its flush (file.max_age).
	MaxAge time.Duration
	// MaxRecords flushes when this many objects are held (file.max_records);
	// 0 means no such limit.
	MaxRecords int64
	// EventTime renders {{timestamp}} from the record's timestamp, else
	// from the wall clock.
	EventTime bool
	// Concurrency is how many objects a flush writes at once.
	Concurrency int

	NewEncoder    func(w io.Writer) (format.Encoder, error)
	NewCompressor func(w io.Writer) (io.WriteCloser, error)
	// Schemas, when set, types each object by its record's registry
	// schemas instead of NewEncoder.
	Schemas sink.Schemas
	// ErrRecord tells record errors (the policy applies) from others.
	ErrRecord  error
	NullValues string // write | ignore | fail
	Policy     errpolicy.Policy
	// OnClose, when set, is told of every object a flush stored, with
	// the writer's lock held: it must only record.
	OnClose func(offsets.Closed)
}

// heldCost is what one held object costs besides its bytes: the map entry,
// its name and bookkeeping.
const heldCost = 256

// held is the newest encoded object for one name.
type held struct {
	data []byte
	tp   offsets.TopicPartition
	meta map[string]string
	cost int64
}

// part is what is known of one owned partition.
type part struct {
	// seen is the offset after the last record handled (held, skipped or
	// superseded); durable is seen as of the last flush that stored
	// everything; reported is the last durable value Committable returned.
	seen, durable, reported int64
	// gen changes when the partition is dropped, so a flush that began
	// before doesn't make its offsets committable for a later ownership.
	gen uint64
	// swept: what earlier owners of the partition left unfinished was
	// removed, by the first flush of this ownership.
	swept bool
}

// Writer holds the latest record per object name and replaces objects in
// storage. It serves the source as the sink does. Create it with New.
type Writer struct {
	cfg    Config
	store  Store
	budget *budget.Budget
	log    *slog.Logger

	mu      sync.Mutex
	held    map[string]*held
	oldest  time.Time // when the oldest held object was first held
	parts   map[offsets.TopicPartition]*part
	gen     uint64
	stats   sink.Stats
	err     error
	wake    chan struct{} // closed when a flush stored everything
	flowing bool          // a flush is running
	// pressed: WriteSome stopped for the budget while a flush ran; the
	// caller waits for the budget, so another flush must follow.
	pressed bool

	// flushMu runs flushes one at a time: two at once could store an older
	// value of a name after a newer one.
	flushMu  sync.Mutex
	inflight sync.WaitGroup
	ctx      context.Context // ends background flushes on Close
	stop     context.CancelFunc
}

// New returns a writer. Close stops it.
func New(cfg Config, store Store, b *budget.Budget, log *slog.Logger) *Writer {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	ctx, stop := context.WithCancel(context.Background())
	w := &Writer{
		cfg: cfg, store: store, budget: b, log: log,
		held:  map[string]*held{},
		parts: map[offsets.TopicPartition]*part{},
		wake:  make(chan struct{}),
		ctx:   ctx, stop: stop,
	}
	w.stats.Closed = map[offsets.Reason]int64{}
	return w
}

// Assign is called for a partition resumed from a ledger; this layout keeps
// none, so it only starts tracking the partition.
func (w *Writer) Assign(tp offsets.TopicPartition, _ ledger.Identity, p ledger.Point) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partLocked(tp, p.State.Next)
}

func (w *Writer) partLocked(tp offsets.TopicPartition, at int64) *part {
	p := w.parts[tp]
	if p == nil {
		p = &part{seen: at, durable: at, reported: at, gen: w.gen}
		w.parts[tp] = p
	}
	return p
}

// LogStart logs and counts the offsets from where the partition stands up
// to the log start (or first) as lost: the log deleted them before they
// were handled, so a key's latest value may be missing. This layout keeps
// no ledger to record them in.
func (w *Writer) LogStart(tp offsets.TopicPartition, logStart, first int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.parts[tp]
	to := min(logStart, first)
	if p == nil || p.seen < 0 || to <= p.seen {
		return
	}
	n := to - p.seen
	if w.stats.Lost == nil {
		w.stats.Lost = map[string]int64{}
	}
	w.stats.Lost[offsets.GapRetention] += n
	w.log.Error("records were deleted from the log before Spillway stored them: they are lost, and a key's latest value may be missing",
		"topic", tp.Topic, "partition", tp.Partition, "offsets", offsets.FormatRanges(offsets.Ranges{{p.seen, to}}), "count", n,
		"fix", "keep the topic's retention above the longest time Spillway may be down or behind")
}

// Err is the first fatal error, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Writer) failLocked(err error) {
	if w.err == nil {
		w.err = err
		// The committer waits on wake: it must see the error and stop the
		// run, even if no record comes to meet it.
		close(w.wake)
		w.wake = make(chan struct{})
	}
}

// Stats returns a copy of the counters. FilesOpen counts held objects.
func (w *Writer) Stats() sink.Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.FilesOpen = len(w.held)
	st.Lost = maps.Clone(w.stats.Lost)
	st.Closed = map[offsets.Reason]int64{}
	for k, v := range w.stats.Closed {
		st.Closed[k] = v
	}
	return st
}

// WriteSome takes records in offset order per partition. It stops early,
// saying how many it took, when the budget is over its high watermark: a
// flush is then under way, and the caller waits for the budget.
func (w *Writer) WriteSome(ctx context.Context, recs []*kgo.Record) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	now := time.Now()
	for i, r := range recs {
		if err := w.writeOneLocked(ctx, r, now); err != nil {
			w.failLocked(err)
			return i, err
		}
		switch {
		case w.cfg.MaxRecords > 0 && int64(len(w.held)) >= w.cfg.MaxRecords:
			w.startFlushLocked(offsets.ReasonRecords)
		case w.budget.Over():
			w.pressed = true
			w.startFlushLocked(offsets.ReasonPressure)
			return i + 1, nil
		}
	}
	return len(recs), nil
}

// Relieve does nothing: a writer that holds no open files has nothing to
// relieve. Its objects are held as encoded bytes, and under pressure
// WriteSome starts a flush of every one of them, which brings the budget
// below its low watermark.
func (w *Writer) Relieve(context.Context) error { return nil }

// OpenFiles is empty: a writer that holds no open files has none to list.
// Held objects are counted in Stats.FilesOpen.
func (w *Writer) OpenFiles() []sink.OpenFile { return nil }

// Write is WriteSome for callers that don't wait on the budget.
func (w *Writer) Write(ctx context.Context, recs []*kgo.Record) error {
	for len(recs) > 0 {
		n, err := w.WriteSome(ctx, recs)
		if err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

func (w *Writer) writeOneLocked(ctx context.Context, r *kgo.Record, now time.Time) error {
	tp := offsets.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	p := w.partLocked(tp, r.Offset)
	handled := func() { p.seen = r.Offset + 1 }
	if r.Value == nil {
		switch w.cfg.NullValues {
		case "ignore":
			w.stats.Skipped++
			handled()
			return nil
		case "fail":
			if err := w.applyPolicy(ctx, r, fmt.Errorf("record %s/%d@%d has a null value and errors.null_values is fail", r.Topic, r.Partition, r.Offset)); err != nil {
				return err
			}
			handled()
			return nil
		}
	}
	data, err := w.encode(r)
	if err != nil {
		if w.cfg.ErrRecord == nil || !errors.Is(err, w.cfg.ErrRecord) {
			return fmt.Errorf("encode %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		if err := w.applyPolicy(ctx, r, fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)); err != nil {
			return err
		}
		handled()
		return nil
	}
	t := now
	if w.cfg.EventTime {
		t = r.Timestamp
	}
	name := w.cfg.Prefix + w.cfg.Template.Render(naming.Vars{Topic: r.Topic, Partition: r.Partition, StartOffset: r.Offset, Time: t, Key: r.Key}) + w.cfg.Extension
	h := &held{data: data, tp: tp, cost: int64(cap(data)+len(name)) + heldCost, meta: map[string]string{
		"spillway-topic":     r.Topic,
		"spillway-partition": strconv.Itoa(int(r.Partition)),
		"spillway-offset":    strconv.FormatInt(r.Offset, 10),
	}}
	if old := w.held[name]; old != nil {
		w.budget.Release(budget.HeldObjects, old.cost)
	} else if len(w.held) == 0 {
		w.oldest = now
	}
	w.held[name] = h
	w.budget.Acquire(budget.HeldObjects, h.cost)
	w.stats.Records++
	handled()
	return nil
}

func (w *Writer) applyPolicy(ctx context.Context, r *kgo.Record, cause error) error {
	out, err := w.cfg.Policy.Apply(ctx, r, cause)
	if err != nil {
		return err
	}
	w.stats.Skipped++
	if out == errpolicy.DeadLettered {
		w.stats.DeadLettered++
	}
	return nil
}

// encode makes one object of r: the format's whole file, compressed.
func (w *Writer) encode(r *kgo.Record) ([]byte, error) {
	var buf bytes.Buffer
	comp, err := w.cfg.NewCompressor(&buf)
	if err != nil {
		return nil, err
	}
	var enc format.Encoder
	if w.cfg.Schemas != nil {
		enc, err = w.cfg.Schemas.NewEncoder(comp, w.cfg.Schemas.Of(r))
	} else {
		enc, err = w.cfg.NewEncoder(comp)
	}
	if err != nil {
		return nil, err
	}
	err = enc.Encode(r)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if cerr := comp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// flushBatch is what one flush stores, and the partitions' offsets it makes
// committable once stored.
type flushBatch struct {
	objs map[string]*held
	upto map[offsets.TopicPartition]part
	why  offsets.Reason
}

// takeLocked moves every held object into a batch.
func (w *Writer) takeLocked(why offsets.Reason) *flushBatch {
	b := &flushBatch{objs: w.held, upto: map[offsets.TopicPartition]part{}, why: why}
	for tp, p := range w.parts {
		b.upto[tp] = *p
	}
	w.held = map[string]*held{}
	return b
}

// startFlushLocked flushes in the background, unless a flush runs already:
// what is held now waits for the next one.
func (w *Writer) startFlushLocked(why offsets.Reason) {
	if w.flowing || len(w.held) == 0 {
		return
	}
	w.flowing = true
	w.pressed = false
	w.inflight.Add(1)
	go func() {
		defer w.inflight.Done()
		w.flushMu.Lock()
		defer w.flushMu.Unlock()
		w.mu.Lock()
		b := w.takeLocked(why)
		w.mu.Unlock()
		err := w.store1(w.ctx, b)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.flowing = false
		if err != nil {
			w.failLocked(err)
			return
		}
		// The consumer stopped for the budget during this flush and waits
		// for it to drain; what it held since can only drain by a flush.
		if w.pressed {
			w.startFlushLocked(offsets.ReasonPressure)
		}
	}()
}

// store1 writes a batch, Concurrency objects at a time, then makes its
// offsets committable.
func (w *Writer) store1(ctx context.Context, b *flushBatch) error {
	if len(b.objs) == 0 {
		w.finish(b)
		return nil
	}
	if err := w.sweep(ctx, b); err != nil {
		return err
	}
	names := make(chan string)
	errs := make(chan error, w.cfg.Concurrency)
	var bytesOut, n int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(w.cfg.Concurrency, len(b.objs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				h := b.objs[name]
				if err := w.store.ReplaceOwned(ctx, name, owner(h.tp), h.data, h.meta); err != nil {
					errs <- fmt.Errorf("store %s: %w", name, err)
					return
				}
				mu.Lock()
				bytesOut += int64(len(h.data))
				n++
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for name := range b.objs {
		select {
		case names <- name:
		case err = <-errs:
			break feed
		}
	}
	close(names)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	w.release(b.objs)
	w.mu.Lock()
	w.stats.FilesUploaded += n
	w.stats.BytesUploaded += bytesOut
	w.stats.Stored += n
	w.mu.Unlock()
	if err != nil {
		// Nothing of the batch is committed: a restart writes it again.
		return err
	}
	w.finish(b)
	return nil
}

// sweep removes, before the first objects of a partition's ownership are
// stored, what earlier owners that died mid-write left for it: no name
// says which partition an unfinished object is for, so only its owner
// can tell it is abandoned. Partitions under one prefix take one walk.
func (w *Writer) sweep(ctx context.Context, b *flushBatch) error {
	byPrefix := map[string][]offsets.TopicPartition{}
	for tp, p := range b.upto {
		if !p.swept {
			pp, _ := w.cfg.Template.PartitionPrefix(tp.Topic, tp.Partition)
			byPrefix[w.cfg.Prefix+pp] = append(byPrefix[w.cfg.Prefix+pp], tp)
		}
	}
	for prefix, tps := range byPrefix {
		owners := make([]string, len(tps))
		for i, tp := range tps {
			owners[i] = owner(tp)
		}
		if err := w.store.RemoveAbandonedOwned(ctx, prefix, owners); err != nil {
			return err
		}
		w.mu.Lock()
		for _, tp := range tps {
			if p := w.parts[tp]; p != nil && p.gen == b.upto[tp].gen {
				p.swept = true
			}
		}
		w.mu.Unlock()
	}
	return nil
}

// finish makes a stored batch's offsets committable, for partitions still
// owned as they were when the batch was taken.
func (w *Writer) finish(b *flushBatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for tp, was := range b.upto {
		if p := w.parts[tp]; p != nil && p.gen == was.gen && was.seen > p.durable {
			p.durable = was.seen
		}
	}
	w.stats.Closed[b.why] += int64(len(b.objs))
	if w.cfg.OnClose != nil {
		for name, h := range b.objs {
			w.cfg.OnClose(offsets.Closed{Key: name, Partition: h.tp, Reason: b.why, Records: 1})
		}
	}
	close(w.wake)
	w.wake = make(chan struct{})
}

// Flush stores everything held and waits until it is stored. It flushes
// every partition's objects, not only those of tps: an object of one
// partition may hold a record that superseded another partition's, so
// storing only some could commit an offset whose value is held elsewhere.
func (w *Writer) Flush(ctx context.Context, _ map[offsets.TopicPartition]bool, why offsets.Reason) error {
	done := make(chan error, 1)
	w.inflight.Add(1)
	go func() {
		defer w.inflight.Done()
		w.flushMu.Lock()
		defer w.flushMu.Unlock()
		w.mu.Lock()
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			done <- err
			return
		}
		b := w.takeLocked(why)
		w.mu.Unlock()
		err := w.store1(ctx, b)
		if err != nil {
			w.mu.Lock()
			w.failLocked(err)
			w.mu.Unlock()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("wait for uploads: %w", ctx.Err())
	}
}

// Tick flushes when the oldest held object has waited max_age.
func (w *Writer) Tick(_ context.Context, now time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.cfg.MaxAge > 0 && len(w.held) > 0 && now.Sub(w.oldest) >= w.cfg.MaxAge {
		w.startFlushLocked(offsets.ReasonAge)
	}
	return nil
}

// RunTicker calls Tick until ctx ends.
func (w *Writer) RunTicker(ctx context.Context) { sink.RunTicks(ctx, w.cfg.MaxAge, w.Tick) }

// Committable pops, per partition (only those in only, unless it is nil),
// the offset to commit when it advanced.
func (w *Writer) Committable(only map[offsets.TopicPartition]bool) map[offsets.TopicPartition]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[offsets.TopicPartition]int64{}
	for tp, p := range w.parts {
		if only != nil && !only[tp] {
			continue
		}
		if p.durable > p.reported {
			out[tp] = p.durable
			p.reported = p.durable
		}
	}
	return out
}

// Durable returns a channel closed the next time a flush stores everything.
func (w *Writer) Durable() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wake
}

// Drop forgets partitions this process no longer owns. Their held objects
// are let go (the new owner reads their records again), and a flush under
// way no longer makes their offsets committable.
func (w *Writer) Drop(tps map[offsets.TopicPartition]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	for name, h := range w.held {
		if tps[h.tp] {
			w.budget.Release(budget.HeldObjects, h.cost)
			delete(w.held, name)
		}
	}
	for tp := range tps {
		delete(w.parts, tp)
	}
}

// Close stops background flushes and lets go of what is held. Call Flush
// first for a graceful stop.
func (w *Writer) Close() {
	w.stop()
	w.inflight.Wait()
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.release(w.held)
	w.held = map[string]*held{}
}

// release gives back the budget objs held.
func (w *Writer) release(objs map[string]*held) {
	var cost int64
	for _, h := range objs {
		cost += h.cost
	}
	w.budget.Release(budget.HeldObjects, cost)
}
