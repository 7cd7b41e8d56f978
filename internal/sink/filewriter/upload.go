package filewriter

import (
	"errors"
	"fmt"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/sink/publish"
	"github.com/spillway/spillway/internal/storage"
)

// Publication, the file goroutine's part: once its file is finished, the
// goroutine waits for the file's turn in its partition (package publish
// keeps the order and writes the ledger entries), then publishes it. It
// takes the order's lock, and the sink's error lock through Fail.

// pendingCost is what a closed file waiting for storage holds besides its
// part buffers (counted by storage) and its writer: its goroutine and state.
const pendingCost = 16 << 10

// upload streams the rest of a closed file and publishes it once the
// partition's previous file is published. Parts keep streaming while it
// waits; only the final step (the link, or completing the multipart upload)
// is ordered. Should the previous file fail, this one is abandoned, so a
// crash can never leave a later file stored after a missing one. It runs
// on the file's goroutine, after finish; err is finish's.
// It takes the order's lock and the sink's error lock (Fail), and waits
// for the partition's previous file without a lock.
func (s *Shared) upload(f *File, err error) {
	defer s.inflight.Done()
	defer s.pub.Ended(f.turn)
	defer func() {
		s.budget.Release(budget.ClosedFiles, pendingCost)
		if f.charged {
			s.budget.Release(budget.WriterBuffers, s.bucket.WriterMemory())
		}
		// An atomic, not the poll side's lock: a writer holding it may
		// be waiting on the budget.
		s.uploading.Add(-1)
	}()
	if err != nil {
		if f.w != nil {
			f.w.Abort()
		}
		s.uploadFailed(f, err)
		return
	}
	if !s.pub.Await(s.ctx, f.turn) {
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
// upload calls it before f leaves the queue (Order.Ended), so that no
// later file of the partition can miss it. f's goroutine; it takes the
// order's lock and the sink's error lock (Fail).
func (s *Shared) uploadFailed(f *File, err error) {
	s.pub.Fail(f.turn)
	err = fmt.Errorf("%s/%d: %w", f.tp.Topic, f.tp.Partition, err)
	s.fail(err)
	s.tracker.Fail(err)
}

// publishEmpty ends a file every record of which the error policy
// skipped: it stores nothing, but lets its offsets be committed; a gap it
// adopted still needs its entry. f's goroutine, in f's turn.
func (s *Shared) publishEmpty(f *File) {
	f.w.Abort()
	if len(s.tracker.Gaps(f.u)) > 0 {
		if err := s.writeEntry(f, 0, 0); err != nil {
			if !errors.Is(err, publish.ErrLostOwnership) {
				s.uploadFailed(f, err)
			}
			return
		}
	}
	f.turn.Durable()
	s.tracker.MarkDurable(f.u)
}

// publish writes f's ledger entry, then commits f to storage, which makes
// it visible. f's goroutine, in f's turn.
func (s *Shared) publish(f *File) {
	n := f.w.Written()
	if err := s.writeEntry(f, n, f.w.CRC32C()); err != nil {
		f.w.Abort()
		if errors.Is(err, publish.ErrLostOwnership) {
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
	f.turn.Durable()
	s.filesUploaded.Add(1)
	s.bytesUploaded.Add(n)
	s.storedRecords.Add(f.encoded)
	s.tracker.MarkDurable(f.u)
	if e := f.turn.Entry(); s.cfg.Published != nil && e != nil {
		s.cfg.Published(f.tp, *e)
	}
}

// writeEntry writes f's ledger entry, for a file of n bytes and checksum
// sum, before f is published (publish.Order.WriteEntry).
// f's goroutine, in f's turn.
func (s *Shared) writeEntry(f *File, n int64, sum uint32) error {
	return s.pub.WriteEntry(s.ctx, f.turn, publish.File{Key: f.key, Unit: f.u, Records: f.encoded, Bytes: n, CRC32C: sum})
}
