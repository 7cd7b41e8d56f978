// Package publish orders the publication of a sink's files and writes
// their ledger entries.
//
// A closed file is published (its ledger entry written, then its upload
// committed) only after its partition's previous file, so that storage
// always holds a gap-free run of each partition's offsets, which is what
// resuming from the last stored file relies on. Should a file fail, none of
// its partition's later files is published: a restart would resume after
// them and skip the failed file's records. The sink's file goroutines
// publish, each its own file, after finishing it; the poll side queues a
// file as it closes it; rebalance callbacks assign and drop partitions.
package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

// Order is a sink's publication state, under its own mutex. File
// goroutines call Fail, Await, WriteEntry and Ended for their own file;
// the poll side calls Open and Queue with the router's lock held, and
// Assign and Drop come from rebalance callbacks.
type Order struct {
	// Set by New, then read-only.
	ledger     *ledger.Ledger // nil: no entries
	writer     string
	deployment ledger.Deployment
	tracker    *offsets.Tracker

	mu sync.Mutex
	// unpublished holds, per partition and in offset order, the closed
	// files whose upload has not ended.
	unpublished map[offsets.TopicPartition][]*Turn
	// failed marks the partitions one of whose uploads failed. None of
	// their later files may be published, not even one closed after the
	// failed file left the queue: a restart would resume after it and skip
	// the failed file's records.
	failed map[offsets.TopicPartition]bool
	// ledgered holds, per partition given by Assign, its identity and
	// the sequence number of its next ledger entry.
	ledgered map[offsets.TopicPartition]*part
}

type part struct {
	id  ledger.Identity
	seq int64
}

// New returns the publication order of a sink whose files' offsets t
// tracks. With l set, each file gets an entry in l before it is published,
// naming writer and dep, for partitions given an identity by Assign.
func New(l *ledger.Ledger, writer string, dep ledger.Deployment, t *offsets.Tracker) *Order {
	return &Order{
		ledger: l, writer: writer, deployment: dep, tracker: t,
		unpublished: map[offsets.TopicPartition][]*Turn{},
		failed:      map[offsets.TopicPartition]bool{},
		ledgered:    map[offsets.TopicPartition]*part{},
	}
}

// Turn is one file's place in its partition's publication order. Open
// sets tp, lp and encoded; Queue sets prev and ended when the file closes,
// before its queue is closed, so that its goroutine reads them after;
// durable is written by that goroutine before it closes ended, and read by
// the next file's only after.
type Turn struct {
	tp      offsets.TopicPartition
	encoded <-chan struct{} // closed once the file's encoding ended
	prev    *Turn           // the partition's previous file still uploading
	ended   chan struct{}   // closed when the upload ended, either way
	durable bool            // read after ended is closed
	dropped atomic.Bool     // the partition was lost (Drop): don't publish
	// lp is the partition's ledger as it was when the file opened: a file
	// belongs to one ownership of its partition, and must not write an
	// entry for a later one.
	lp *part
	// entry is the file's ledger entry once written (WriteEntry).
	entry *ledger.Entry
}

// Assign gives tp its ledger identity; its next entry is number seq.
// A rebalance callback (onAssigned); takes the order's lock.
func (o *Order) Assign(tp offsets.TopicPartition, id ledger.Identity, seq int64) {
	o.mu.Lock()
	o.ledgered[tp] = &part{id: id, seq: seq}
	o.mu.Unlock()
}

// Open returns the turn of a file of tp that opens now, under tp's
// ownership as it is now. encoded is closed once the file's encoding
// ended (see PrevEncoded).
// The poll side, the router's lock held; takes the order's lock.
func (o *Order) Open(tp offsets.TopicPartition, encoded <-chan struct{}) *Turn {
	o.mu.Lock()
	defer o.mu.Unlock()
	return &Turn{tp: tp, encoded: encoded, lp: o.ledgered[tp]}
}

// Queue gives t's file, closed, its place in its partition's order: its
// goroutine will publish it after the previous one.
// The poll side, the router's lock held, before the file's queue is
// closed, which hands prev and ended to the file's goroutine; takes the
// order's lock.
func (o *Order) Queue(t *Turn) {
	t.ended = make(chan struct{})
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.unpublished[t.tp]
	if len(q) > 0 {
		t.prev = q[len(q)-1]
	}
	o.unpublished[t.tp] = append(q, t)
}

// Drop forgets partitions this instance no longer owns. Their files not yet
// published stay unpublished: the new owner resumes from what storage
// holds. They leave the queue too, so that should the partition come back,
// its new files don't wait on them.
// Sink.Drop, the router's lock held; takes the order's lock.
func (o *Order) Drop(tps map[offsets.TopicPartition]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for tp := range tps {
		for _, t := range o.unpublished[tp] {
			t.dropped.Store(true)
		}
		delete(o.unpublished, tp)
		delete(o.failed, tp)
		delete(o.ledgered, tp)
	}
}

// PrevEncoded is closed once the encoding of the partition's previous
// file still uploading ended; nil when there is none.
// t's goroutine, after its queue was closed.
func (t *Turn) PrevEncoded() <-chan struct{} {
	if t.prev == nil {
		return nil
	}
	return t.prev.encoded
}

// Fail marks t's partition failed: none of its later files is published.
// t's goroutine, before Ended, so that no later file of the partition can
// miss it; takes the order's lock.
func (o *Order) Fail(t *Turn) {
	o.mu.Lock()
	o.failed[t.tp] = true
	o.mu.Unlock()
}

// Await waits until the upload of t's predecessor in its partition ended,
// and reports whether t's file may be published: not if the predecessor
// was not stored, ctx ended (the sink stopped), or the partition failed
// or was dropped.
// t's goroutine; it waits without a lock, then takes the order's.
func (o *Order) Await(ctx context.Context, t *Turn) bool {
	if t.prev != nil {
		select {
		case <-t.prev.ended:
			if !t.prev.durable {
				// It failed (and that was reported) or was dropped.
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
	o.mu.Lock()
	failed := o.failed[t.tp]
	o.mu.Unlock()
	return !t.dropped.Load() && !failed
}

// Durable records that t's file is stored, or, with nothing to store, may
// be committed: the next file of its partition may be published.
// t's goroutine, in t's turn, before Ended.
func (t *Turn) Durable() { t.durable = true }

// Entry is t's ledger entry, once WriteEntry wrote it.
// t's goroutine.
func (t *Turn) Entry() *ledger.Entry { return t.entry }

// Ended takes t off its partition's queue and lets the next file go on.
// t's goroutine, once its upload ended either way; takes the order's lock.
func (o *Order) Ended(t *Turn) {
	o.mu.Lock()
	q := o.unpublished[t.tp]
	for i, g := range q {
		if g == t {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(o.unpublished, t.tp)
	} else {
		o.unpublished[t.tp] = q
	}
	o.mu.Unlock()
	close(t.ended)
}

// ErrLostOwnership: the file's partition was dropped before its entry.
var ErrLostOwnership = errors.New("the partition was dropped before the file was published")

// File is what a file's ledger entry says of it: its key, its offsets in
// the tracker, and, as it will be stored, its records, size and CRC-32C.
type File struct {
	Key     string
	Unit    *offsets.Unit
	Records int64
	Bytes   int64
	CRC32C  uint32
}

// WriteEntry writes the ledger entry of t's file f before it is published:
// the partition's state with every earlier file published, and f's own
// runs. Every byte of f is written (staged, not visible) by now, so both
// are f's as it will be stored. Entries of a partition are written one at
// a time, in the order its files are published. Without a ledger, or for
// a partition Assign gave no identity, it writes nothing.
// t's goroutine, in t's turn, no lock held: it takes the order's lock to
// check the ownership and to advance the sequence number, which it reads
// without it, since no other goroutine writes a partition's entries
// meanwhile. The append itself holds no lock.
func (o *Order) WriteEntry(ctx context.Context, t *Turn, f File) error {
	lp := t.lp
	if o.ledger == nil || lp == nil {
		return nil
	}
	o.mu.Lock()
	owned := o.ledgered[t.tp] == lp
	o.mu.Unlock()
	if !owned {
		// Lost, and maybe given back since: this file is of the earlier
		// ownership, whose state the tracker no longer holds.
		return ErrLostOwnership
	}
	e := &ledger.Entry{
		Cluster: lp.id.Cluster, Topic: lp.id.Topic, TopicID: lp.id.TopicID, Partition: lp.id.Partition,
		Seq: lp.seq, Writer: o.writer, Deployment: o.deployment, Time: time.Now().UTC(),
		Before: o.tracker.State(t.tp),
		File:   ledger.FileInfo{Key: f.Key, Ranges: o.tracker.Ranges(f.Unit), Records: f.Records, Bytes: f.Bytes, CRC32C: ledger.FormatCRC32C(f.CRC32C)},
		Gaps:   o.tracker.Gaps(f.Unit),
	}
	if f.Records == 0 {
		// Only its gaps are recorded: nothing is published.
		e.File = ledger.FileInfo{}
	}
	if err := o.ledger.Append(ctx, e); err != nil {
		return o.appendFailed(ctx, lp, e, err)
	}
	o.mu.Lock()
	lp.seq++
	o.mu.Unlock()
	t.entry = e
	return nil
}

// appendFailed explains why entry e of lp could not be appended: a taken
// sequence number is a fence, raised by another deployment or another
// instance of this one.
// A file goroutine (WriteEntry).
func (o *Order) appendFailed(ctx context.Context, lp *part, e *ledger.Entry, err error) error {
	if !errors.Is(err, storage.ErrExists) {
		return fmt.Errorf("ledger entry %d: %w", e.Seq, err)
	}
	if other, rerr := o.ledger.Read(ctx, lp.id, o.ledger.EntryKey(lp.id, e.Seq)); rerr == nil && other.Group != "" && e.Group != "" && other.Group != e.Group {
		return fmt.Errorf("ledger entry %d of %s/%d: %w: another deployment, kafka.group %q (%s), wrote it first: two deployments write into this prefix, and they fence each other off. Give each its own storage.prefix",
			e.Seq, lp.id.Topic, lp.id.Partition, err, other.Group, other.Writer)
	}
	return fmt.Errorf("ledger entry %d: %w: another instance wrote it first, so it owns the partition now; this one stops, and a restart resumes from the ledger", e.Seq, err)
}
