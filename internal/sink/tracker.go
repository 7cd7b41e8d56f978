package sink

import (
	"context"
	"sync"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// segment is a run of offsets [start, end) handled by one file (or skipped
// with no file open). It becomes durable when its file is committed to
// storage; skipped runs are durable at once.
type segment struct {
	start, end int64
	durable    bool
}

// tracker knows, per partition, which offsets are durable. It is the only
// input to offset commits: a partition's committable offset is the end of
// the longest prefix of durable segments, so a commit never passes a record
// that is not in storage.
type tracker struct {
	mu    sync.Mutex
	parts map[TopicPartition][]*segment
	wake  chan struct{}
	err   error // an upload failed: waiting is pointless
}

func newTracker() *tracker {
	return &tracker{parts: map[TopicPartition][]*segment{}, wake: make(chan struct{})}
}

func (t *tracker) open(tp TopicPartition, start int64) *segment {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &segment{start: start, end: start}
	t.parts[tp] = append(t.parts[tp], s)
	return s
}

// finish fixes the segment's end once its file is closed.
func (t *tracker) finish(s *segment, end int64) {
	t.mu.Lock()
	s.end = end
	t.mu.Unlock()
}

// skipped records offsets [start, end) that need no storage.
func (t *tracker) skipped(tp TopicPartition, start, end int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parts[tp] = append(t.parts[tp], &segment{start: start, end: end, durable: true})
	t.signalLocked()
}

func (t *tracker) markDurable(s *segment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.durable = true
	t.signalLocked()
}

func (t *tracker) signalLocked() {
	close(t.wake)
	t.wake = make(chan struct{})
}

// Wake returns a channel that is closed the next time something becomes
// durable.
func (t *tracker) Wake() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wake
}

// committable pops the durable prefix of each partition (all partitions when
// only is nil) and returns the offset to commit for those that advanced.
func (t *tracker) committable(only map[TopicPartition]bool) map[TopicPartition]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[TopicPartition]int64{}
	for tp, segs := range t.parts {
		if only != nil && !only[tp] {
			continue
		}
		i := 0
		for i < len(segs) && segs[i].durable {
			out[tp] = segs[i].end
			i++
		}
		if i > 0 {
			t.parts[tp] = append(segs[:0:0], segs[i:]...)
		}
	}
	return out
}

// fail records that an upload failed and wakes waiters.
func (t *tracker) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
	t.signalLocked()
}

// segments returns the segments of the partitions that exist now.
func (t *tracker) segments(tps map[TopicPartition]bool) []*segment {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*segment
	for tp := range tps {
		out = append(out, t.parts[tp]...)
	}
	return out
}

// pending reports whether any of the segments is not durable yet, or the
// error that means it never will be.
func (t *tracker) pending(segs []*segment) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return false, t.err
	}
	for _, s := range segs {
		if !s.durable {
			return true, nil
		}
	}
	return false, nil
}

// waitDurable blocks until every one of the segments is durable.
func (t *tracker) waitDurable(ctx context.Context, segs []*segment) error {
	for {
		w := t.Wake()
		pending, err := t.pending(segs)
		if err != nil {
			return err
		}
		if !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w:
		}
	}
}

func (t *tracker) drop(tps map[TopicPartition]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tp := range tps {
		delete(t.parts, tp)
	}
}
