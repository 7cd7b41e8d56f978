// Package source is the Kafka side: the consumer group, fetching with
// pause and resume under the byte budget, rebalance callbacks, and offset
// commits of exactly what the sink reports durable.
package source

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/source/sourceopts"
)

// Writer is what the source feeds records to and asks about durability:
// the sink, or package latest. Its methods are called from three
// goroutines, and may run at once, so they must be safe for concurrent
// use:
//
//   - the poll loop (Run): LogStart, WriteSome, and Relieve while it waits
//     for the budget;
//   - kgo's rebalance callbacks (onAssigned, onRevoked, onLost): Assign,
//     Flush, Committable, Drop and Err. With kgo.BlockRebalanceOnPoll they
//     run only while the poll loop is between a fetch's records and the
//     next poll, or waits for the budget (it allows rebalances then);
//   - the commit loop: Durable, Err and Committable.
//
// Once Run has returned, Shutdown calls Flush and Committable.
type Writer interface {
	// WriteSome takes records, in offset order per partition, until the
	// budget stays full; it returns how many it took. The poll loop calls
	// it with the records of one fetch, and again with the rest once the
	// budget has room; a rebalance callback may run in between (it
	// leaves out the records of partitions dropped meanwhile).
	WriteSome(ctx context.Context, recs []*kgo.Record) (int, error)
	// Flush closes the open files of tps (all when nil) and waits until
	// they are durable. onRevoked calls it for the revoked partitions
	// while the poll loop is blocked, and Shutdown for all of them after
	// Run returned.
	Flush(ctx context.Context, tps map[offsets.TopicPartition]bool, why offsets.Reason) error
	// Committable pops, per partition of only (all when nil), the offset
	// to commit. The commit loop, onRevoked and Shutdown call it, one at a
	// time (under the source's commitMu).
	Committable(only map[offsets.TopicPartition]bool) map[offsets.TopicPartition]int64
	// Durable returns a channel closed the next time something becomes
	// durable. The commit loop waits on it.
	Durable() <-chan struct{}
	// Drop forgets partitions no longer owned, without storing their open
	// files: onRevoked calls it after Flush, onLost at once, under the
	// source's commitMu.
	Drop(tps map[offsets.TopicPartition]bool)
	// Assign starts a partition from where storage stands. onAssigned
	// calls it before the partition's first fetch.
	Assign(tp offsets.TopicPartition, id ledger.Identity, p ledger.Point)
	// Err is the writer's first fatal error (a failed upload), if any. The
	// commit loop asks after every wake, so that the source stops on it
	// even when no record arrives to meet it; onRevoked asks before it
	// flushes.
	Err() error
	// Relieve closes files to bring the budget below its low watermarks
	// when nothing else will: no upload is in flight to free memory. The
	// poll loop calls it while it waits for the budget, fetching paused
	// and rebalances allowed, so it may run while a rebalance callback
	// calls Flush or Drop.
	Relieve(ctx context.Context) error
	// LogStart says where a partition's log started when a fetch
	// returned its records from first on: the offsets from where the
	// partition stands up to it were deleted before they were stored.
	// The poll loop calls it before it writes the fetch's records.
	LogStart(tp offsets.TopicPartition, logStart, first int64)
}

// Resumer tells where storage stands for a partition of the log id, whose
// offsets now run from log.Start to log.End.
type Resumer func(ctx context.Context, id ledger.Identity, log ledger.Log) (ledger.Point, error)

// TopicCheck refuses a topic the consumer must not write (its files would
// go where Spillway keeps its state): config.Config.CheckTopic.
type TopicCheck func(topic string) error

// resumeConcurrency bounds the partitions whose storage is read at once on
// an assignment: each costs a few listings and reads, and a thousand
// partitions one after another would hold the rebalance for minutes.
const resumeConcurrency = 16

// Source consumes a group's partitions into a Writer.
type Source struct {
	group   string
	resumer Resumer
	check   TopicCheck
	cl      *kgo.Client
	sink    Writer
	budget  *budget.Budget
	log     *slog.Logger
	// revokeTimeout bounds how long a revoked partition's files may take.
	revokeTimeout time.Duration

	commitMu sync.Mutex
	pending  map[offsets.TopicPartition]int64 // durable, not yet committed
	// forgotten counts revokes and losses, and when each partition was
	// last forgotten: records polled before that are no longer ours.
	forgotten   uint64
	forgottenAt map[offsets.TopicPartition]uint64
	stats       Stats
	statsMu     sync.Mutex
	pausedAt    time.Time // when the pause in progress began
	topics      map[string]bool
	// regex is kafka.topic_regex, for Health to say when it matches
	// nothing.
	regex string
	// plan sizes the client's fetches, and says what the budget reserves
	// for them and which records don't fit in that (RecordRoom).
	plan budget.Plan
	// oversized holds the partitions already warned of a record larger
	// than plan.RecordRoom: once each is enough.
	oversized map[offsets.TopicPartition]bool

	// stopEnds stops the end offset watch of the pause in progress
	// (watchEnds), and waits for it; nil when none runs. Only the poll
	// loop's goroutine uses it.
	stopEnds func()

	// fatal is set by a rebalance callback that can't go on safely; it
	// ends Run through cancelPoll before any record of the partition is
	// written.
	fatalMu    sync.Mutex
	fatal      error
	cancelPoll context.CancelFunc

	// resuming bounds a resume from storage in onAssigned, whose context
	// from the client is canceled only at the end of its Close, after
	// leaving the group, which waits for that very callback: a request of
	// the resume that a broker holds would hold the stop past its
	// deadline. It is canceled when a stop begins, and by Close.
	resuming    context.Context
	endResuming context.CancelFunc

	health health
}

// Stats are the source's counters.
type Stats struct {
	Fetched   int64
	Committed map[offsets.TopicPartition]int64
	Pauses    int64
	Paused    bool
	// PausedFor is the time fetching spent paused by back pressure,
	// the pause in progress included.
	PausedFor time.Duration
	// HighWatermarks are the partitions' end offsets as the last fetch
	// of each told them, or, while fetching is paused, as listed every
	// pausedEndsInterval; FirstFetched the offset of the first record
	// this process fetched of each, for lag before its first commit.
	HighWatermarks map[offsets.TopicPartition]int64
	FirstFetched   map[offsets.TopicPartition]int64
}

// New builds the consumer. It does not connect until Run.
//
// resume, when set, is asked on every assignment where storage ends, so that
// records stored before a crash, but not committed, are not written again.
//
// plan sizes the client's fetches; a zero plan leaves the client's defaults.
//
// check, when set, is asked of every topic assigned, before anything of it
// is read or written: kafka.topic_regex can match topics that config
// validation couldn't know of.
//
// extra are added to the client's options last (metrics hooks).
func New(k sourceopts.Options, plan budget.Plan, s Writer, b *budget.Budget, revokeTimeout time.Duration, resume Resumer, check TopicCheck, log *slog.Logger, extra ...kgo.Opt) (*Source, error) {
	src := &Source{group: k.Group, resumer: resume, check: check, sink: s, budget: b, log: log, revokeTimeout: revokeTimeout,
		pending: map[offsets.TopicPartition]int64{}, topics: map[string]bool{},
		forgottenAt: map[offsets.TopicPartition]uint64{}, plan: plan, oversized: map[offsets.TopicPartition]bool{}, regex: k.TopicRegex}
	src.resuming, src.endResuming = context.WithCancel(context.Background())
	src.stats.Committed = map[offsets.TopicPartition]int64{}
	src.stats.HighWatermarks = map[offsets.TopicPartition]int64{}
	src.stats.FirstFetched = map[offsets.TopicPartition]int64{}
	src.health.init(k.Group)
	opts, err := ClientOptions(k)
	if err != nil {
		return nil, err
	}
	start := kgo.NewOffset().AtStart()
	if k.StartOffset == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	opts = append(opts,
		kgo.ConsumerGroup(k.Group),
		kgo.SessionTimeout(k.SessionTimeout),
		// kafka.start_offset is where a group without a commit starts.
		// An offset out of range (the log start passed it, or the log was
		// truncated under it) always resumes at the log start: what the
		// log deleted is then recorded as lost (Writer.LogStart). Resetting
		// per start_offset would pass every record to the log end in
		// silence. A log truncated below what this process already read,
		// then written again, is not told apart while it runs: its new
		// records at reused offsets count as read; resume's check against
		// the log end catches it at the next assignment.
		kgo.ConsumeStartOffset(start),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(src.health.revoked(src.onRevoked)),
		kgo.OnPartitionsLost(src.health.lost(src.onLost)),
		kgo.OnPartitionsAssigned(src.health.assigned(src.onAssigned, src.fatalErr)),
		kgo.WithHooks(&src.health),
		kgo.WithLogger(slogLogger{log}),
	)
	if k.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(k.InstanceID))
	}
	if plan.FetchMax > 0 {
		// The broker still returns at least one batch, so big records pass.
		opts = append(opts,
			kgo.FetchMaxBytes(plan.FetchMax),
			kgo.FetchMaxPartitionBytes(plan.FetchPartitionMax),
			kgo.MaxConcurrentFetches(plan.Fetches))
	}
	if k.TopicRegex != "" {
		if _, err := k.TopicPattern(); err != nil {
			return nil, err
		}
		opts = append(opts, kgo.ConsumeTopics(k.TopicRegex), kgo.ConsumeRegex())
	} else {
		opts = append(opts, kgo.ConsumeTopics(k.Topics...))
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	src.cl = cl
	return src, nil
}

// Stats returns a copy of the counters.
func (s *Source) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := s.stats
	st.Committed = maps.Clone(s.stats.Committed)
	st.HighWatermarks = maps.Clone(s.stats.HighWatermarks)
	st.FirstFetched = maps.Clone(s.stats.FirstFetched)
	if st.Paused {
		st.PausedFor += time.Since(s.pausedAt)
	}
	return st
}

// pausedEndsInterval is how often the end offsets of the assigned
// partitions are listed while fetching is paused: no fetch tells them
// then, and lag would stand still while the topics grow. One request per
// interval, and none for a pause shorter than it.
const pausedEndsInterval = 2 * time.Second

// commitInterval is how often the commit loop commits when no upload
// wakes it: a commit that failed is retried then, even while nothing new
// is stored.
const commitInterval = 5 * time.Second

// Run fetches and writes until stop ends (a graceful stop) or an error.
// Writes use hard, which ends only when the stop deadline has passed. It
// commits durable offsets in the background as soon as they are durable.
func (s *Source) Run(stop, hard context.Context) error {
	stop, cancelPoll := context.WithCancel(stop)
	defer cancelPoll()
	defer context.AfterFunc(stop, s.endResuming)()
	s.fatalMu.Lock()
	s.cancelPoll = cancelPoll
	if s.fatal != nil {
		// A callback stopped the run before it started (the client joins
		// the group from New on, so the first assignment may come first):
		// the poll would wait for records that, on an idle topic, never
		// come.
		cancelPoll()
	}
	s.fatalMu.Unlock()
	cctx, cancel := context.WithCancel(hard)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.commitLoop(cctx) }()
	defer wg.Wait()
	defer cancel()
	defer s.watchEndsStop() // a stop can end a pause without a resume

	for stop.Err() == nil {
		if s.budget.Over() {
			s.pause(stop)
			if err := s.budget.Wait(stop, s.sink.Relieve); err != nil {
				break
			}
			s.resume()
		}
		// Everything buffered, not a number of records: the client asks a
		// broker for its next fetch only once its buffered fetch is taken
		// whole, so a poll that leaves some behind keeps the broker idle
		// while the poll is written. The fetch share (budget.Plan.Reserved)
		// holds every buffered fetch already.
		fetches := s.cl.PollFetches(stop)
		if err := s.fatalErr(); err != nil {
			s.cl.AllowRebalance()
			return err
		}
		if fetches.IsClientClosed() || stop.Err() != nil {
			s.cl.AllowRebalance()
			break
		}
		var fatal error
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			s.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
			var ke *kerr.Error
			if errors.As(err, &ke) && (ke == kerr.SaslAuthenticationFailed || ke == kerr.TopicAuthorizationFailed || ke == kerr.GroupAuthorizationFailed) {
				fatal = fmt.Errorf("kafka: %s/%d: %w", t, p, err)
			}
		})
		if fatal != nil {
			s.cl.AllowRebalance()
			return fatal
		}
		recs := fetches.Records()
		var size int64
		for _, r := range recs {
			n := RecordSize(r)
			size += n
			s.topics[r.Topic] = true
			s.warnOversized(r, n)
		}
		// Polled records are part of the fetch buffers already reserved:
		// move their bytes from one holder to the other, don't count twice.
		// Release before acquire, so the move itself never shows as a peak.
		// What the reservation can't hold is counted apart, over the limit:
		// waiting can't free it, only writing it can (see budget.Plan).
		moved := min(size, s.plan.Reserved)
		s.budget.Release(budget.FetchBuffers, moved)
		s.budget.Acquire(budget.PolledRecords, moved)
		s.budget.Acquire(budget.PolledUnreserved, size-moved)
		// What the fetch says of the partitions' ends counts before the
		// write, which can wait long (storage, the schema registry): lag
		// must show the records waiting in it.
		s.statsMu.Lock()
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			tp := offsets.TopicPartition{Topic: p.Topic, Partition: p.Partition}
			if p.HighWatermark > 0 {
				s.stats.HighWatermarks[tp] = p.HighWatermark
			}
			if _, ok := s.stats.FirstFetched[tp]; !ok && len(p.Records) > 0 {
				s.stats.FirstFetched[tp] = p.Records[0].Offset
			}
		})
		s.statsMu.Unlock()
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 && p.LogStartOffset >= 0 {
				s.sink.LogStart(offsets.TopicPartition{Topic: p.Topic, Partition: p.Partition}, p.LogStartOffset, p.Records[0].Offset)
			}
		})
		err := s.write(stop, hard, recs)
		s.budget.Release(budget.PolledUnreserved, size-moved)
		s.budget.Release(budget.PolledRecords, moved)
		s.budget.Acquire(budget.FetchBuffers, moved)
		s.statsMu.Lock()
		s.stats.Fetched += int64(len(recs))
		s.statsMu.Unlock()
		s.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
	return s.fatalErr()
}

// write hands polled records to the sink. When the budget fills within the
// batch it waits, fetching paused and rebalances allowed, as between polls;
// then it passes on the rest, less the records of partitions that were
// revoked or lost meanwhile: their new owner consumes them.
func (s *Source) write(stop, hard context.Context, recs []*kgo.Record) error {
	for {
		n, err := s.sink.WriteSome(hard, recs)
		if err != nil {
			return err
		}
		recs = recs[n:]
		if len(recs) == 0 {
			return nil
		}
		if stop.Err() != nil {
			// Stopping, and the sink took what it could (or nothing: a
			// stage before it, the schema registry, gave up waiting for
			// the stop): the rest is never written, so never committed.
			// Asking again at once would spin until shutdown.timeout.
			return nil
		}
		s.commitMu.Lock()
		seen := s.forgotten
		s.commitMu.Unlock()
		// Below the low watermark, not just the high one: a file may be
		// what is waiting to open, and it needs room.
		s.pause(stop)
		err = s.budget.WaitLow(stop, s.sink.Relieve)
		s.resume()
		if err != nil {
			// Stopping: the rest was never written, so never committed.
			return nil
		}
		s.commitMu.Lock()
		kept := recs[:0:0]
		for _, r := range recs {
			if s.forgottenAt[offsets.TopicPartition{Topic: r.Topic, Partition: r.Partition}] <= seen {
				kept = append(kept, r)
			}
		}
		s.commitMu.Unlock()
		recs = kept
	}
}

// stopWith ends Run with err: a callback found that going on could write
// records twice.
func (s *Source) stopWith(err error) {
	s.fatalMu.Lock()
	defer s.fatalMu.Unlock()
	if s.fatal == nil {
		s.fatal = err
	}
	if s.cancelPoll != nil {
		s.cancelPoll()
	}
}

func (s *Source) fatalErr() error {
	s.fatalMu.Lock()
	defer s.fatalMu.Unlock()
	return s.fatal
}

// warnOversized warns, once per partition, of a record larger than the
// budget's room: it takes memory over the limit while it is written.
func (s *Source) warnOversized(r *kgo.Record, size int64) {
	room := s.plan.RecordRoom()
	tp := offsets.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	if s.plan.FetchMax <= 0 || size <= room || s.oversized[tp] {
		return
	}
	s.oversized[tp] = true
	// The multiple is the format's: the records held apart and the copies
	// the file format makes while it writes one (docs/memory.md).
	room2 := fmt.Sprintf("give the process room for memory_limit plus %d times the largest record", s.plan.LargeRecordMultiple())
	fix := "raise backpressure.memory_limit, or " + room2
	if need, ok := budget.ProcessFor(size, s.plan.RecordCopies); ok {
		fix = fmt.Sprintf("raise backpressure.memory_limit to %dMiB for records this size to fit in it, or %s", need>>20, room2)
	}
	s.log.Warn("record larger than the memory budget's room for one record: Spillway holds it over backpressure.memory_limit while it writes it; "+fix+" (warned once per partition)",
		"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "record_bytes", size, "room_bytes", room,
		"memory_limit_bytes", s.plan.Process)
}

// RecordSize is the memory a fetched record holds, for the budget.
func RecordSize(r *kgo.Record) int64 {
	n := int64(len(r.Key) + len(r.Value) + len(r.Topic) + 128)
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value) + 32)
	}
	return n
}

// pause pauses fetching, and lists end offsets until resume (watchEnds),
// within ctx.
func (s *Source) pause(ctx context.Context) {
	topics := make([]string, 0, len(s.topics))
	for t := range s.topics {
		topics = append(topics, t)
	}
	s.cl.PauseFetchTopics(topics...)
	s.cl.AllowRebalance()
	snap := s.budget.Snapshot()
	s.log.Info("budget full: fetching paused", "used", snap.Used, "limit", snap.Limit, "records", snap.Records,
		"disk_used", snap.Disk.Used, "disk_limit", snap.Disk.Limit)
	s.statsMu.Lock()
	s.stats.Pauses++
	if !s.stats.Paused {
		s.pausedAt = time.Now()
	}
	s.stats.Paused = true
	s.statsMu.Unlock()
	if s.stopEnds == nil {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.watchEnds(wctx) }()
		s.stopEnds = func() { cancel(); <-done }
	}
}

// watchEndsStop ends the end offset watch, if one runs, and waits for it:
// a listing that ends after a fetch could put an older end in its place.
func (s *Source) watchEndsStop() {
	if s.stopEnds != nil {
		s.stopEnds()
		s.stopEnds = nil
	}
}

// watchEnds lists the assigned partitions' end offsets every
// pausedEndsInterval until ctx ends, for the lag that Stats'
// HighWatermarks give while no fetch does.
func (s *Source) watchEnds(ctx context.Context) {
	adm := kadm.NewClient(s.cl)
	t := time.NewTicker(pausedEndsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		assigned := map[offsets.TopicPartition]bool{}
		topics := map[string]bool{}
		for _, tp := range s.Health().Assigned {
			assigned[tp] = true
			topics[tp.Topic] = true
		}
		if len(topics) == 0 {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, pausedEndsInterval)
		ends, err := adm.ListEndOffsets(lctx, slices.Sorted(maps.Keys(topics))...)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("list end offsets while fetching is paused", "err", err)
			}
			continue
		}
		s.statsMu.Lock()
		ends.Each(func(o kadm.ListedOffset) {
			if tp := (offsets.TopicPartition{Topic: o.Topic, Partition: o.Partition}); o.Err == nil && assigned[tp] {
				s.stats.HighWatermarks[tp] = o.Offset
			}
		})
		s.statsMu.Unlock()
	}
}

func (s *Source) resume() {
	s.watchEndsStop()
	topics := make([]string, 0, len(s.topics))
	for t := range s.topics {
		topics = append(topics, t)
	}
	s.cl.ResumeFetchTopics(topics...)
	s.log.Info("budget below low watermark: fetching resumed", "used", s.budget.Snapshot().Used)
	s.statsMu.Lock()
	if s.stats.Paused {
		s.stats.PausedFor += time.Since(s.pausedAt)
	}
	s.stats.Paused = false
	s.statsMu.Unlock()
}

// ShutdownError says which step of a graceful stop failed, so that what
// is reported of the others is true: Stored, when the open files could not
// all be stored; Committed, when their offsets could not all be committed;
// Left, when leaving the group failed. Nil fields succeeded.
type ShutdownError struct {
	Stored, Committed, Left error
}

func (e *ShutdownError) Error() string {
	switch {
	case e.Stored != nil:
		return fmt.Sprintf("store open files: %v", e.Stored)
	case e.Committed != nil:
		return e.Committed.Error()
	}
	return fmt.Sprintf("leave group: %v", e.Left)
}

func (e *ShutdownError) Unwrap() []error {
	return []error{e.Stored, e.Committed, e.Left}
}

// Shutdown makes every open file durable, commits, and leaves the group,
// all within ctx. Its error is a *ShutdownError.
func (s *Source) Shutdown(ctx context.Context) error {
	var e ShutdownError
	e.Stored = s.sink.Flush(ctx, nil, offsets.ReasonShutdown)
	// What is durable is committed even when the rest is not.
	e.Committed = s.commit(ctx, nil)
	if e.Committed == nil && e.Stored == nil {
		s.commitMu.Lock()
		if len(s.pending) > 0 {
			e.Committed = fmt.Errorf("commit offsets: %d partitions left uncommitted", len(s.pending))
		}
		s.commitMu.Unlock()
	}
	if lerr := s.cl.LeaveGroupContext(ctx); lerr != nil && !errors.Is(lerr, context.Canceled) {
		e.Left = lerr
	}
	if e.Stored == nil && e.Committed == nil && e.Left == nil {
		return nil
	}
	return &e
}

// Close releases the client, within ctx. Call Shutdown first for a
// graceful stop. kgo's Close leaves the group with no deadline of its own,
// and a broker that stopped answering would hold it for minutes: past ctx,
// Close returns and leaves the client to the process's exit.
func (s *Source) Close(ctx context.Context) error {
	s.endResuming()
	done := make(chan struct{})
	go func() { s.cl.Close(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close the Kafka client (a broker does not answer): %w", ctx.Err())
	}
}

func (s *Source) commitLoop(ctx context.Context) {
	t := time.NewTicker(commitInterval)
	defer t.Stop()
	onDurable(ctx, s.sink.Durable, t.C, func() bool {
		if err := s.sink.Err(); err != nil {
			// An idle partition's upload failed: nothing would meet the
			// error in the poll loop, and the run would idle with it.
			s.stopWith(err)
			return false
		}
		if err := s.commit(ctx, nil); err != nil && ctx.Err() == nil {
			s.log.Warn("offset commit failed; will retry", "err", err)
		}
		return true
	})
}

// onDurable runs turn when something becomes durable and on each tick,
// until ctx ends or turn returns false. It takes the next wake-up before
// a turn reads what is durable, not after: a file that becomes durable
// while a commit is in flight then wakes the next turn at once, instead
// of waiting for the tick (the last files of a run waited up to
// commitInterval to be committed).
func onDurable(ctx context.Context, durable func() <-chan struct{}, tick <-chan time.Time, turn func() bool) {
	wake := durable()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick:
		}
		wake = durable()
		if !turn() {
			return
		}
	}
}

// commit commits what the sink reports durable, for the given partitions
// (all when only is nil). It keeps what failed for the next attempt.
func (s *Source) commit(ctx context.Context, only map[offsets.TopicPartition]bool) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	for tp, off := range s.sink.Committable(only) {
		s.pending[tp] = off
	}
	toCommit := map[string]map[int32]kgo.EpochOffset{}
	n := 0
	for tp, off := range s.pending {
		if only != nil && !only[tp] {
			continue
		}
		if toCommit[tp.Topic] == nil {
			toCommit[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		toCommit[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
		n++
	}
	if n == 0 {
		return nil
	}
	var cerr error
	s.cl.CommitOffsetsSync(ctx, toCommit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := offsets.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					cerr = fmt.Errorf("commit %s/%d: %w", t.Topic, p.Partition, e)
					continue
				}
				off := toCommit[t.Topic][p.Partition].Offset
				if s.pending[tp] == off {
					delete(s.pending, tp)
				}
				s.statsMu.Lock()
				s.stats.Committed[tp] = off
				s.statsMu.Unlock()
			}
		}
	})
	if cerr != nil {
		return fmt.Errorf("commit offsets: %w", cerr)
	}
	return nil
}

func toSet(m map[string][]int32) map[offsets.TopicPartition]bool {
	out := map[offsets.TopicPartition]bool{}
	for t, ps := range m {
		for _, p := range ps {
			out[offsets.TopicPartition{Topic: t, Partition: p}] = true
		}
	}
	return out
}

// onRevoked finishes the revoked partitions' files and commits them before
// the partitions move to another member, so the new owner starts exactly
// where this one stopped.
func (s *Source) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	tps := toSet(revoked)
	fctx, cancel := context.WithTimeout(ctx, s.revokeTimeout)
	defer cancel()
	if ferr := s.sink.Err(); ferr != nil {
		// The run stops on the sink's error (logged there), and the
		// client's close revokes: nothing more can be stored. What is
		// durable is still committed below.
		s.log.Debug("revoked partitions not flushed: the sink stopped on an error", "partitions", len(tps))
	} else if err := s.sink.Flush(fctx, tps, offsets.ReasonRevoke); err != nil {
		// Only what was not stored is abandoned: a file stored already is
		// in the ledger, and the new owner resumes after it.
		msg := "revoked partitions not flushed: files not yet stored are abandoned, and their records are consumed again by the new owner"
		if fctx.Err() != nil && ctx.Err() == nil {
			msg = "revoked partitions not flushed within shutdown.timeout: files not yet stored are abandoned, and their records are consumed again by the new owner"
		}
		s.log.Warn(msg, "err", err, "timeout", s.revokeTimeout)
	}
	if err := s.commit(fctx, tps); err != nil {
		s.log.Warn("commit on revoke failed", "err", err)
	}
	s.forget(tps)
}

// onAssigned asks storage where each new partition stands, tells the sink,
// and moves the group's offsets forward to where storage ends when storage
// is ahead: a previous owner crashed after an upload and before its commit,
// or a commit was lost. The client loads committed offsets only after this
// callback returns, so fetching starts at the recovered offset.
//
// When it can't tell where storage stands, or storage holds what this log
// can't have written (another topic id or cluster, offsets past the log
// end), it stops the run rather than consume: going on could write stored
// records again, or skip records. The storage client has retried by then;
// a restart tries again.
func (s *Source) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if s.check != nil {
		for _, t := range slices.Sorted(maps.Keys(assigned)) {
			if err := s.check(t); err != nil {
				s.stopWith(err)
				return
			}
		}
	}
	if s.resumer == nil || len(assigned) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.resuming, cancel)()
	points, committed, err := s.resumeAll(ctx, cl, assigned)
	if err != nil {
		if s.resuming.Err() != nil {
			// Stopping: the poll loop has ended, so no record of these
			// partitions is written, and the stop is not this error.
			s.log.Info("a stop ended the resume from storage of the assigned partitions", "err", err)
			return
		}
		s.stopWith(err)
		return
	}
	moved := map[string]map[int32]kgo.EpochOffset{}
	n := 0
	for _, tp := range slices.SortedFunc(maps.Keys(points), func(a, b offsets.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	}) {
		r := points[tp]
		at := committed[tp]
		p := r.point
		if err := s.checkCommit(tp, &p, at, r.log); err != nil {
			s.stopWith(err)
			return
		}
		// Consume from where storage stands. Where the log deleted
		// records from there first, the fetch is out of range and resumes
		// at the log start (ConsumeResetOffset), and the sink records the
		// offsets between as lost when that fetch shows the log start.
		// The commit is never moved past them before their ledger entry
		// is written: a crash before it would pass them in silence.
		// Without a commit, fetching starts per kafka.start_offset.
		from := p.State.Next
		if from >= 0 && from != at {
			if moved[tp.Topic] == nil {
				moved[tp.Topic] = map[int32]kgo.EpochOffset{}
			}
			moved[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: from}
			n++
		}
		s.sink.Assign(tp, r.id, p)
		s.log.Debug("partition resumed", "topic", tp.Topic, "partition", tp.Partition, "from", p.From,
			"offset", p.State.Next, "stored_above", p.State.Above.Count(), "committed", at)
	}
	if n == 0 {
		return
	}
	var cerr error
	cl.CommitOffsetsSync(ctx, moved, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil && cerr == nil {
					cerr = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, e)
				}
			}
		}
	})
	if cerr != nil {
		s.stopWith(fmt.Errorf("resume from storage: move the group's offsets to where storage ends: %w", cerr))
		return
	}
	s.log.Info("resumed from storage: partitions whose group commit differed from where the ledger stands", "partitions", n)
}

// checkCommit weighs the group's commit at against where storage stands
// (p), and sets p to where the partition resumes. The ledger is the truth
// of what is stored: a commit that disagrees with it (moved by an offset
// reset tool, another consumer of the group, a truncated log or another
// cluster) never makes records be skipped. Without a ledger the commit is
// all there is, and a commit past the log end stops the run.
func (s *Source) checkCommit(tp offsets.TopicPartition, p *ledger.Point, at int64, log ledger.Log) error {
	if p.Note != "" {
		s.log.Warn(p.Note, "topic", tp.Topic, "partition", tp.Partition)
	}
	if !p.Found {
		if at > log.End {
			return &CommitPastEndError{TP: tp, Committed: at, End: log.End}
		}
		// Nothing stored: start where the group's commit, or
		// kafka.start_offset without one, says.
		p.State = offsets.State{Next: at}
		return nil
	}
	switch {
	case at > log.End:
		s.log.Warn("the group's commit is past the log end (an offset reset tool, a truncated log, or another cluster's commit): resuming from the ledger, which says what is stored",
			"topic", tp.Topic, "partition", tp.Partition, "committed", at, "log_end", log.End, "resume_at", p.State.Next, "from", p.From)
	case at > p.State.Next:
		s.log.Warn("the group's commit is ahead of what the ledger says is stored: resuming from the ledger, so the records between are read and stored (records the error policy skipped there are skipped again). To skip records on purpose, stop Spillway and run spillway skip",
			"topic", tp.Topic, "partition", tp.Partition, "committed", at, "resume_at", p.State.Next, "from", p.From)
	}
	return nil
}

// GroupActive tells whether a consumer group has members now.
func GroupActive(ctx context.Context, cl *kgo.Client, group string) (bool, error) {
	groups, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err == nil {
		err = groups.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describe group %s: %w", group, err)
	}
	return len(groups[group].Members) > 0, nil
}

// CommitPastEndError is a group commit past the log end of a partition of
// which storage holds nothing: consuming from it would skip every record
// up to it.
type CommitPastEndError struct {
	TP        offsets.TopicPartition
	Committed int64
	End       int64
}

func (e *CommitPastEndError) Error() string {
	return fmt.Sprintf("the group's commit of %s/%d is %d, past the log end %d, and storage holds nothing of the partition: the commit is not of this log (an offset reset tool, a truncated or recreated topic, or another cluster), and consuming from it would skip every record up to %d. Reset the group's offset for the partition (kafka-consumer-groups --reset-offsets --to-earliest, or --to-offset where storage should start), then start again",
		e.TP.Topic, e.TP.Partition, e.Committed, e.End, e.Committed)
}

type resumed struct {
	id    ledger.Identity
	log   ledger.Log
	point ledger.Point
}

// resumeAll reads, for every assigned partition, its log's identity and
// offsets from Kafka and where it stands in storage. committed is -1 for a
// partition without a commit.
func (s *Source) resumeAll(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) (map[offsets.TopicPartition]resumed, map[offsets.TopicPartition]int64, error) {
	adm := kadm.NewClient(cl)
	topics := make([]string, 0, len(assigned))
	for t := range assigned {
		topics = append(topics, t)
	}
	meta, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("resume from storage: read the topics' ids: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resume from storage: read the log end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resume from storage: read the log start offsets: %w", err)
	}
	offs, err := adm.FetchOffsets(ctx, s.group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resume from storage: read the group's committed offsets: %w", err)
	}
	type job struct {
		tp  offsets.TopicPartition
		id  ledger.Identity
		log ledger.Log
	}
	var jobs []job
	committed := map[offsets.TopicPartition]int64{}
	for topic, parts := range assigned {
		td, ok := meta.Topics[topic]
		if !ok {
			return nil, nil, fmt.Errorf("resume from storage: topic %s: the metadata response left it out (deleted since it was assigned?)", topic)
		}
		if td.Err != nil {
			return nil, nil, fmt.Errorf("resume from storage: topic %s: metadata: %w", topic, td.Err)
		}
		for _, p := range parts {
			tp := offsets.TopicPartition{Topic: topic, Partition: p}
			committed[tp] = -1
			if o, found := offs.Lookup(topic, p); found && o.Err == nil {
				committed[tp] = o.At
			}
			e, _ := ends.Lookup(topic, p)
			st, _ := starts.Lookup(topic, p)
			jobs = append(jobs, job{tp: tp,
				id:  ledger.Identity{Cluster: meta.Cluster, Topic: topic, TopicID: base64.RawURLEncoding.EncodeToString(td.ID[:]), Partition: p},
				log: ledger.Log{Start: st.Offset, End: e.Offset}})
		}
	}
	out := make(map[offsets.TopicPartition]resumed, len(jobs))
	var mu sync.Mutex
	// The first failure stops the rest: the assignment fails as a whole,
	// so reading on for the other partitions would only hold the rebalance.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(resumeConcurrency)
	for _, j := range jobs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			p, err := s.resumer(gctx, j.id, j.log)
			if err != nil {
				return fmt.Errorf("resume from storage: %s/%d: %w", j.tp.Topic, j.tp.Partition, err)
			}
			mu.Lock()
			defer mu.Unlock()
			out[j.tp] = resumed{id: j.id, log: j.log, point: p}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return out, committed, nil
}

// onLost drops partitions without committing: another member may own them
// already.
func (s *Source) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	tps := toSet(lost)
	s.log.Warn("partitions lost; dropping their open files without commit", "partitions", len(tps))
	s.forget(tps)
}

func (s *Source) forget(tps map[offsets.TopicPartition]bool) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.sink.Drop(tps)
	s.forgotten++
	for tp := range tps {
		delete(s.pending, tp)
		s.forgottenAt[tp] = s.forgotten
	}
}
