package sink

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

// Publication: a closed file is published (its ledger entry written, then
// its upload committed) only after its partition's previous file, so that
// storage always holds a gap-free run of each partition's offsets. It runs
// on the file's goroutine, after finish; the state it shares with other
// files' goroutines and the poll side is under publisher.mu.

// publisher is the Sink's publication state, under mu. File goroutines
// take mu (upload, writeEntry, ended); the poll side takes it, with
// router.mu held, to queue a closed file and in Assign and Drop.
type publisher struct {
	mu sync.Mutex
	// unpublished holds, per partition and in offset order, the closed files
	// whose upload has not ended. A file is published only after the one
	// before it: storage then always holds a gap-free run of a partition's
	// offsets, which is what resuming from the last stored file relies on.
	unpublished map[offsets.TopicPartition][]*openFile
	// failed marks the partitions one of whose uploads failed. None of
	// their later files may be published, not even one closed after the
	// failed file left the queue: a restart would resume after it and skip
	// the failed file's records.
	failed map[offsets.TopicPartition]bool
	// ledgered holds, per partition given by Assign, its identity and
	// the sequence number of its next ledger entry.
	ledgered map[offsets.TopicPartition]*ledgerPart
}

// publication is a file's publish state. lp is set when the file opens;
// prev and ended when it closes (queueLocked), before its queue is closed,
// so its goroutine reads them after; durable is written by that goroutine
// before it closes ended, and read by the next file's only after.
type publication struct {
	prev    *openFile     // the partition's previous file still uploading
	ended   chan struct{} // closed when the upload ended, either way
	durable bool          // read after ended is closed
	dropped atomic.Bool   // the partition was lost (Drop): don't publish
	// lp is the partition's ledger as it was when the file opened: a file
	// belongs to one ownership of its partition, and must not write an
	// entry for a later one.
	lp *ledgerPart
}

type ledgerPart struct {
	id  ledger.Identity
	seq int64
}

// assign gives tp its ledger identity, from Assign.
// Any goroutine (a rebalance callback); takes mu.
func (p *publisher) assign(tp offsets.TopicPartition, lp *ledgerPart) {
	p.mu.Lock()
	p.ledgered[tp] = lp
	p.mu.Unlock()
}

// ledgerOf is tp's ledger now, for a file that opens.
// Poll side, router.mu held; takes mu.
func (p *publisher) ledgerOf(tp offsets.TopicPartition) *ledgerPart {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ledgered[tp]
}

// queue gives f, closed, its place in its partition's publication order:
// its goroutine will publish it after prev. Poll side, router.mu held,
// before f's queue is closed, which hands prev and ended to the goroutine;
// takes mu.
func (p *publisher) queue(f *openFile) {
	f.ended = make(chan struct{})
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.unpublished[f.tp]
	if len(q) > 0 {
		f.prev = q[len(q)-1]
	}
	p.unpublished[f.tp] = append(q, f)
}

// drop forgets partitions this instance no longer owns. Their files not yet
// published stay unpublished: the new owner resumes from what storage
// holds. They leave the queue too, so that should the partition come back,
// its new files don't wait on them. Drop, router.mu held; takes mu.
func (p *publisher) drop(tps map[offsets.TopicPartition]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for tp := range tps {
		for _, f := range p.unpublished[tp] {
			f.dropped.Store(true)
		}
		delete(p.unpublished, tp)
		delete(p.failed, tp)
		delete(p.ledgered, tp)
	}
}

// pendingCost is what a closed file waiting for storage holds besides its
// part buffers (counted by storage) and its writer: its goroutine and state.
const pendingCost = 16 << 10

// upload streams the rest of a closed file and publishes it once the
// partition's previous file is published. Parts keep streaming while it
// waits; only the final step (the link, or completing the multipart upload)
// is ordered. Should the previous file fail, this one is abandoned, so a
// crash can never leave a later file stored after a missing one. It runs
// on the file's goroutine, after finish; err is finish's.
// It takes pub.mu and errMu, never router.mu, and waits for the
// partition's previous file without a lock.
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
	if err != nil {
		if f.w != nil {
			f.w.Abort()
		}
		s.uploadFailed(f, err)
		return
	}
	if !s.awaitTurn(f) {
		f.w.Abort()
		return
	}
	if f.encoded == 0 {
		s.publishEmpty(f)
		return
	}
	s.publish(f)
}

// uploadFailed marks f's partition failed and stops the sink with err.
// upload calls it before f leaves the queue (ended), so that no later file
// of the partition can miss it. f's goroutine; it takes pub.mu and errMu.
func (s *Sink) uploadFailed(f *openFile, err error) {
	s.pub.mu.Lock()
	s.pub.failed[f.tp] = true
	s.pub.mu.Unlock()
	err = fmt.Errorf("%s/%d: %w", f.tp.Topic, f.tp.Partition, err)
	s.fail(err)
	s.tracker.Fail(err)
}

// awaitTurn waits until the upload of f's predecessor in its partition
// ended, and reports whether f may be published: not if the predecessor
// was not stored, the sink stopped, or the partition failed or was
// dropped. f's goroutine; it takes pub.mu.
func (s *Sink) awaitTurn(f *openFile) bool {
	if f.prev != nil {
		select {
		case <-f.prev.ended:
			if !f.prev.durable {
				// It failed (and that was reported) or was dropped.
				return false
			}
		case <-s.ctx.Done():
			return false
		}
	}
	s.pub.mu.Lock()
	failed := s.pub.failed[f.tp]
	s.pub.mu.Unlock()
	return !f.dropped.Load() && !failed
}

// publishEmpty ends a file every record of which the error policy
// skipped: it stores nothing, but lets its offsets be committed; a gap it
// adopted still needs its entry. f's goroutine, in f's turn.
func (s *Sink) publishEmpty(f *openFile) {
	f.w.Abort()
	if len(s.tracker.Gaps(f.u)) > 0 {
		if err := s.writeEntry(f, 0, 0); err != nil {
			if !errors.Is(err, errLostOwnership) {
				s.uploadFailed(f, err)
			}
			return
		}
	}
	f.durable = true
	s.tracker.MarkDurable(f.u)
}

// publish writes f's ledger entry, then commits f to storage, which makes
// it visible. f's goroutine, in f's turn.
func (s *Sink) publish(f *openFile) {
	n := f.w.Written()
	if err := s.writeEntry(f, n, f.w.CRC32C()); err != nil {
		f.w.Abort()
		if errors.Is(err, errLostOwnership) {
			return
		}
		s.uploadFailed(f, err)
		return
	}
	if err := f.w.Commit(); err != nil {
		if errors.Is(err, storage.ErrExists) {
			// Create-only writes are the fence between writers; and a
			// file Spillway did not write is never overwritten.
			err = fmt.Errorf("%w: Spillway never overwrites a file. Either another instance owns the partition now (this one lost it, and a restart resumes from the ledger), or the file is not this topic's (left by an older topic of the same name, or copied in): then move it out of storage.prefix", err)
		}
		s.uploadFailed(f, err)
		return
	}
	f.durable = true
	s.filesUploaded.Add(1)
	s.bytesUploaded.Add(n)
	s.storedRecords.Add(f.encoded)
	s.tracker.MarkDurable(f.u)
	if s.cfg.Published != nil && f.entry != nil {
		s.cfg.Published(f.tp, *f.entry)
	}
}

// errLostOwnership: the file's partition was dropped before its entry.
var errLostOwnership = errors.New("the partition was dropped before the file was published")

// writeEntry writes the ledger entry of f, whose size is n and checksum
// sum, before f is published: the partition's state with every earlier
// file published, and f's own runs. Every byte of f is written (staged,
// not visible) by now, so both are f's as it will be stored. Entries of a
// partition are written one at a time, in the order its files are
// published.
// f's goroutine, no lock held: it takes pub.mu to check the ownership and
// to advance lp.seq, which it reads without it, since no other goroutine
// writes a partition's entries meanwhile. The append itself holds no lock.
func (s *Sink) writeEntry(f *openFile, n int64, sum uint32) error {
	if s.cfg.Ledger == nil {
		return nil
	}
	lp := f.lp
	if lp == nil {
		return nil
	}
	s.pub.mu.Lock()
	owned := s.pub.ledgered[f.tp] == lp
	s.pub.mu.Unlock()
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
	s.pub.mu.Lock()
	lp.seq++
	s.pub.mu.Unlock()
	f.entry = e
	return nil
}

// ended takes a file whose upload is over off its partition's queue and
// lets the next file go on.
// f's goroutine; it takes pub.mu.
func (s *Sink) ended(f *openFile) {
	s.pub.mu.Lock()
	q := s.pub.unpublished[f.tp]
	for i, g := range q {
		if g == f {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.pub.unpublished, f.tp)
	} else {
		s.pub.unpublished[f.tp] = q
	}
	s.pub.mu.Unlock()
	close(f.ended)
}
