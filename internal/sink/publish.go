package sink

import (
	"errors"
	"fmt"
	"time"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/storage"
)

type ledgerPart struct {
	id  ledger.Identity
	seq int64
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
