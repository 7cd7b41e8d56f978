package sink

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink/filewriter"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The poll side: Write and WriteSome route each record to its open file,
// account its offset, and decide rotations; Tick closes files by age and
// Relieve under pressure. Everything here runs with router.mu held, on the
// goroutine that calls the Sink (the poll loop, a rebalance callback, the
// ticker), never on a file's goroutine.

// router is the Sink's poll-side state: mu guards it all. Flush, Drop,
// Close, Stats and OpenFiles take mu too, from other goroutines.
type router struct {
	mu    sync.Mutex
	files map[fileID]*openFile
	// groups indexes files by partition, then group, so that finding a
	// record's file allocates nothing (m[string(bytes)] does not copy).
	groups map[offsets.TopicPartition]map[string]*openFile
	// groupBuf renders group names without allocating per record.
	groupBuf []byte
	// fieldBuf holds the record's value fields (see readFields).
	fieldBuf []any
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
}

// routeState is an open file's poll-side state, under router.mu. Once the
// file is closed the poll side no longer touches it.
type routeState struct {
	records  int64 // routed to the file, for rotation and the budget's count
	lastUsed time.Time

	// The queue to the file goroutine: pending is the batch being filled,
	// q the batches handed over. queuedIn is every byte handed over.
	pending      []*kgo.Record
	pendingBytes int64
	queuedIn     int64
	touched      bool // in router.touched
	lost         bool // a batch could not be handed over: never publish
	// The last exact reading of the file's size near max_bytes (see
	// sizeLocked): what it had written, of queuedIn bytes handed over,
	// at a ratio of exactRatio bytes out per byte in.
	exact, exactIn int64
	exactRatio     float64
}

// OpenFile describes a file being written, for OpenFiles.
type OpenFile struct {
	Key       string
	Partition offsets.TopicPartition
	Records   int64
	Opened    time.Time
}

// OpenFiles lists the files being written, for status pages.
// Any goroutine (status page); it takes router.mu.
func (s *Sink) OpenFiles() []OpenFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]OpenFile, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, OpenFile{Key: f.key, Partition: f.tp, Records: f.records, Opened: f.created})
	}
	return out
}

// LogStart tells the sink where a partition's log starts, as a fetch that
// returned records from first on said. Offsets from where the partition
// stands up to the log start (or first, if lower) were deleted before
// Spillway stored them: retention, DeleteRecords, or an unclean leader
// election. They are recorded as a gap in the ledger entry of the
// partition's next file, logged at ERROR and counted, never passed
// silently. The poll loop calls it, before it writes the fetch's records.
// Takes router.mu.
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
// Any goroutine (tests, tools); it takes router.mu.
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
// The poll loop calls it; it takes router.mu.
func (s *Sink) WriteSome(ctx context.Context, recs []*kgo.Record) (int, error) {
	return s.write(ctx, recs, true)
}

// write is Write and WriteSome with router.mu taken: it hands over the
// batches the records filled before it lets go.
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

// writeLocked routes recs, relieving the budget as it fills. router.mu
// held.
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
// router.mu held.
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
	if err := s.readFields(r); err != nil {
		return s.recordError(ctx, tp, r, err)
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
// router.mu held.
func (s *Sink) overLocked() bool {
	s.reportRecordsLocked()
	return s.budget.Over()
}

// reportRecordsLocked tells the budget of the records written since the
// last report. router.mu held.
func (s *Sink) reportRecordsLocked() {
	if s.unaccounted != 0 {
		s.budget.AddRecords(s.unaccounted)
		s.unaccounted = 0
	}
}

// recordError applies the error policy to one record.
// router.mu held.
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
// Either side: the poll side, router.mu held (recordError), or a file
// goroutine (skipLate). It takes no lock of the sink's, and may wait for
// the dead-letter topic.
func (s *Sink) policy(ctx context.Context, r *kgo.Record, cause error) (dead bool, err error) {
	out, err := s.cfg.Policy.Apply(ctx, r, cause)
	return out == errpolicy.DeadLettered, err
}

// skip accounts for a record that is handled without being stored, so its
// offset can still be committed.
// router.mu held.
func (s *Sink) skip(_ context.Context, tp offsets.TopicPartition, r *kgo.Record, _ error) error {
	s.stats.Skipped++
	s.tracker.Route(tp, r.Offset, nil)
	return nil
}

// vars are the template values of a record, for its group and its file's
// name.
// router.mu held.
func (s *Sink) vars(r *kgo.Record, now time.Time) naming.Vars {
	t := now
	if s.cfg.EventTime {
		t = r.Timestamp
	}
	// r.Key as it is: a copy would turn an empty key into a null one.
	return naming.Vars{Topic: r.Topic, Partition: r.Partition, StartOffset: r.Offset, Time: t, Key: r.Key, Fields: s.fieldBuf}
}

// fileFor returns r's open file, closing the file the record can't go in
// (schemas) or the least recent one (max_open_files), and opening it and
// starting its goroutine if need be. router.mu held; it takes the
// publication order's lock.
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
	f := &openFile{id: id, tp: tp, key: key, start: r.Offset,
		created: now, u: &offsets.Unit{}, schemas: s.schemasOf(r)}
	f.lastUsed = now
	f.fw = s.writers.Start(filewriter.Spec{TP: tp, Key: key, Start: r.Offset, Schemas: f.schemas, Unit: f.u}, s.cfg.QueueBatches)
	s.files[id] = f
	if s.groups[tp] == nil {
		s.groups[tp] = map[string]*openFile{}
	}
	s.groups[tp][id.group] = f
	return f, nil
}

// forgetLocked takes f out of the open files.
// router.mu held.
func (s *Sink) forgetLocked(f *openFile) {
	delete(s.files, f.id)
	if g := s.groups[f.tp]; g != nil {
		delete(g, f.id.group)
		if len(g) == 0 {
			delete(s.groups, f.tp)
		}
	}
}

// leastRecentLocked is the open file written to longest ago. router.mu
// held.
func (s *Sink) leastRecentLocked() *openFile {
	var lru *openFile
	for _, f := range s.files {
		if lru == nil || f.lastUsed.Before(lru.lastUsed) {
			lru = f
		}
	}
	return lru
}

// closeLocked hands a file's last batch to its goroutine, which finishes
// the encoding and hands the file to storage in the background. It waits
// neither for the encoder nor for storage: what the file still holds stays
// counted in the budget, and the budget is what slows consumption. The
// file takes its place in its partition's publication order now.
// router.mu held; it takes the publication order's lock.
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
		f.fw.Abandon()
		if err == nil {
			err = fmt.Errorf("finish %s: a batch of its records was not encoded", f.key)
		}
		return err
	}
	s.log.Debug("file closed", "key", f.key, "reason", why, "records", f.records)
	f.fw.Close() // its goroutine finishes the file, then uploads it
	if !f.fw.Spooled() || f.fw.Direct() {
		// Not a spooled file: it waits for an encode slot and for room
		// in the budget, which may be what the caller's relief is
		// waiting for (see filewriter's spool.go).
		s.addFinishingLocked(f)
	}
	return nil
}

// size estimates what f will be once every record handed to it is
// encoded: what its goroutine wrote, plus what is still queued at the
// ratio of bytes out to bytes in seen so far. Compression makes the file's
// own count lag; the estimate keeps a MaxBytes rotation from waiting for
// the encoder.
// router.mu held; the file goroutine's part is read from its atomics.
func (f *openFile) size() int64 {
	w, c := f.fw.Written(), f.fw.Consumed()
	behind := f.queuedIn + f.pendingBytes - c
	if behind <= 0 {
		return w
	}
	if c == 0 {
		return w + behind
	}
	return w + int64(float64(behind)*float64(w)/float64(c))
}

// sizeLocked is f's size for a MaxBytes rotation: the estimate while it
// is well below max and, near max, what the file's goroutine wrote once it
// has caught up, so that a file rotates at the same record as if it were
// encoded on the spot. Near max is within slack, an eighth of the file and
// at most one batch. There the poll side doesn't wait for the encoder at
// every record: after each exact reading it queues records without waiting
// until, at the file's ratio so far, they may fill half the room left. The
// waits come closer as the file nears max, some log2(slack / record size)
// of them per file instead of one per record of the slack (docs/design.md,
// "The write pipeline"). A file then passes max by its last record, as
// before, unless those queued since the last reading took more than twice
// the room the ratio gave them. The ratio is the file's own: while its
// goroutine has encoded nothing, it is read once a quarter of max is
// queued.
// router.mu held; it may wait for the file goroutine.
func (s *Sink) sizeLocked(ctx context.Context, f *openFile, max int64) (int64, error) {
	if f.fw.Spooled() && !f.fw.Direct() {
		// Nothing is encoded before it closes: see spooling.State.Estimate.
		return s.spooling.Estimate(f.queuedIn + f.pendingBytes), nil
	}
	slack := min(max/8, batchBytes)
	// Until the goroutine has encoded anything, the estimate's ratio is a
	// guess (1): the envelope alone takes jsonl to 1.7 times its input.
	// Once a quarter of the file rides on the guess, read the ratio.
	guess := f.fw.Consumed() == 0 && f.queuedIn+f.pendingBytes >= max/4
	if est := f.size(); est < max-slack && !guess {
		return est, nil
	}
	if f.exactIn > 0 {
		since := f.queuedIn + f.pendingBytes - f.exactIn
		if est := int64(float64(since) * f.exactRatio); est < (max-f.exact)/2 {
			return f.exact + est, nil
		}
	}
	if err := s.drainLocked(ctx, f); err != nil {
		return 0, err
	}
	s.sizeWaits++
	// Every byte handed over is encoded: the ratio is the file's own.
	f.exact, f.exactIn = f.fw.Written(), f.queuedIn
	f.exactRatio = 1
	if c := f.fw.Consumed(); c > 0 {
		f.exactRatio = float64(f.exact) / float64(c)
	}
	return f.exact, nil
}

// Relieve closes files while no upload is in flight, down to the low
// watermarks (see relieveLocked); with uploads in flight it does nothing:
// they free memory as they end, and the caller waits for them.
// The poll loop calls it while it waits for the budget, when rebalance
// callbacks may run; it takes router.mu.
func (s *Sink) Relieve(ctx context.Context) error {
	if s.writers.Uploading() != 0 {
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
// router.mu held; it waits for file goroutines, which never take it.
func (s *Sink) relieveLocked(ctx context.Context) error {
	s.awaitFinishingLocked(ctx)
	s.chains.Drop()
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
	idle := s.writers.Uploading() == 0
	files := make([]*openFile, 0, len(s.files))
	for _, f := range s.files {
		if overDisk || overRecs || !f.fw.Spooled() || f.fw.Direct() {
			files = append(files, f)
		}
	}
	weight := func(f *openFile) int64 { return f.fw.Memory() }
	switch {
	case overDisk:
		weight = func(f *openFile) int64 { return f.fw.SpoolBytes() }
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

// awaitFinishingLocked waits until the files closed so far have been
// finished by their goroutines, which then release their encoders' memory
// (but not what storage has yet to take), or until ctx ends.
// router.mu held.
func (s *Sink) awaitFinishingLocked(ctx context.Context) {
	for _, f := range s.finishing {
		select {
		case <-f.fw.Finished():
		case <-ctx.Done():
			return
		}
	}
	clear(s.finishing)
	s.finishing = s.finishing[:0]
}

// addFinishingLocked notes a closed file whose goroutine has yet to finish
// it, and forgets those that are finished.
// router.mu held.
func (s *Sink) addFinishingLocked(f *openFile) {
	kept := s.finishing[:0]
	for _, g := range s.finishing {
		select {
		case <-g.fw.Finished():
		default:
			kept = append(kept, g)
		}
	}
	clear(s.finishing[len(kept):])
	s.finishing = append(kept, f)
}

// Tick closes files older than max_age, including files of partitions that
// went idle.
// The ticker goroutine (RunTicker) calls it; it takes router.mu.
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
// router.mu held.
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
// It runs on a goroutine of its own.
func (s *Sink) RunTicker(ctx context.Context) { RunTicks(ctx, s.cfg.MaxAge, s.Tick) }

// RunTicks calls tick until ctx ends or tick fails: every second, or four
// times per maxAge when that is shorter, so a file is closed at most a
// quarter of maxAge late.
// It runs on the caller's goroutine.
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
