// Package restore writes what storage holds back into Kafka: the records
// of the data files the ledger lists, in offset order per partition, to
// the same partition number of a destination topic, byte for byte (key,
// value, headers, timestamp; null and empty apart), exactly once across
// crashes. Each transaction of a transactional producer carries a bounded
// run of records and, committed with them, the next source offset of each
// partition it wrote, as the offset of a consumer group on the
// destination's partition. A restore that starts again reads those offsets
// and goes on from there; two restores of one destination share the
// transactional id, so the one that started last fences the other.
package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway/spillway/internal/readback"
	"github.com/spillway/spillway/internal/restore/decode"
)

// Defaults of Options.
const (
	// DefaultTxnBytes bounds the records of one transaction: what a crash
	// makes a restart produce again, and what a read_committed consumer
	// waits for before it sees them. It does not bound memory: the
	// producer's buffer does.
	DefaultTxnBytes = 16 << 20
	// DefaultBufferBytes bounds what the producer holds unacknowledged
	// (kgo.MaxBufferedBytes): a slow broker stalls reading, not memory.
	DefaultBufferBytes = 32 << 20
)

// BufferFor is the producer's buffer (Options.BufferBytes) within a
// process memory limit: an eighth of it, at most DefaultBufferBytes and
// at least 4 MiB. The rest is the read-ahead (up to readPartitions
// partitions, a few batches of readAheadBytes each, plus a record), the
// decoders, the producer's encoded and compressed requests, and the Go
// runtime's headroom over the live heap. In a 128 MiB cgroup a buffer of
// 32 MiB was OOM-killed while the broker was slow (TestRestoreBoundedMemorySlowBroker).
func BufferFor(processLimit int64) int {
	return int(min(max(processLimit/8, 4<<20), DefaultBufferBytes))
}

// Options are how a restore runs.
type Options struct {
	Selection
	// Group names the progress (a consumer group whose offsets on DST's
	// partitions are the next source offsets) and is the transactional
	// id. DefaultGroup derives it from the destinations.
	Group string
	// OffsetHeader, when set, adds each record's source offset, in
	// decimal, as a last header of that name.
	OffsetHeader string
	TxnBytes     int64
	BufferBytes  int
	// ContentExts gives the format and compression of a file by its key
	// (naming.Names.ContentExts).
	ContentExts func(key string) []string
	// Progress, when set, gets a line of progress, rate and ETA every
	// ProgressEvery (a second by default) and at the end.
	Progress      io.Writer
	ProgressEvery time.Duration
	// AfterProduce, when set, is called with the count of records handed
	// to the producer so far; an error stops the restore at once, as a
	// crash would: nothing is flushed, committed or aborted. Tests kill
	// a restore mid-transaction with it.
	AfterProduce func(n int64) error
	// Live, when set, gets the restore's counters as it runs (the admin
	// endpoint's /metrics reads them).
	Live *Live
}

// DefaultGroup is the progress group and transactional id of a restore
// into dsts: one per set of destinations, so that two restores into the
// same topic fence each other.
func DefaultGroup(dsts []string) string {
	s := append([]string(nil), dsts...)
	sort.Strings(s)
	s = slices.Compact(s) // one name per destination, however many partitions go to it
	g := "spillway-restore"
	for _, d := range s {
		g += "-" + d
	}
	return g
}

// Result is what a restore did.
type Result struct {
	Records  int64 // produced and committed
	Bytes    int64 // of keys, values and headers produced
	Skipped  int64 // read but below the committed progress or outside the selection
	Txns     int64
	Resumed  map[string]map[int32]int64 // the progress found at start, by DST topic and partition
	Duration time.Duration
}

// FencedError is a restore stopped because another producer with the
// same transactional id started: the other restore goes on from the
// progress this one committed.
type FencedError struct {
	Group string
	Err   error
}

func (e *FencedError) Error() string {
	// The broker answers alike when another producer took the id and when
	// it aborted this one's transaction for outlasting its timeout, so the
	// message names both.
	return fmt.Sprintf("restore fenced: either another restore with transactional id %q started (it goes on from the progress committed so far), or the broker aborted this one's transaction for outlasting its transaction timeout (run again with a smaller --txn-bytes); nothing of the open transaction is visible to read_committed consumers (%v)", e.Group, e.Err)
}

func (e *FencedError) Unwrap() error { return e.Err }

// Run restores plan: it checks that each DST exists with the partitions
// it needs, fences any other restore of the same group, reads the
// committed progress, and produces the rest. clientOpts connect to the
// cluster (source.ClientOptions).
func Run(ctx context.Context, st readback.Reader, plan []Partition, opts Options, clientOpts []kgo.Opt) (Result, error) {
	start := time.Now()
	if opts.TxnBytes <= 0 {
		opts.TxnBytes = DefaultTxnBytes
	}
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = DefaultBufferBytes
	}
	if opts.Group == "" {
		var dsts []string
		for _, p := range plan {
			dsts = append(dsts, p.To)
		}
		opts.Group = DefaultGroup(dsts)
	}
	admCl, err := kgo.NewClient(clientOpts...)
	if err != nil {
		return Result{}, fmt.Errorf("kafka client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ids, err := checkDestinations(ctx, adm, plan)
	if err != nil {
		return Result{}, err
	}

	live := opts.Live
	if live == nil {
		live = &Live{}
	}
	r := &restorer{Live: live, opts: opts, st: st, ids: ids, progress: map[string]map[int32]int64{}}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), clientOpts...),
		kgo.TransactionalID(opts.Group),
		kgo.MaxBufferedBytes(opts.BufferBytes),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(10), // a retried record keeps its sequence: idempotent, so never twice
	)...)
	if err != nil {
		return Result{}, fmt.Errorf("kafka client: %w", err)
	}
	r.cl = cl
	defer cl.Close()
	// Initialising the producer id fences an older restore of the same
	// group and aborts its open transaction; only then is the committed
	// progress what this restore continues from.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return Result{}, fmt.Errorf("init transactional producer %q: %w", opts.Group, err)
	}
	resumed, err := fetchProgress(ctx, adm, opts.Group, plan)
	if err != nil {
		return Result{}, err
	}
	res := Result{Resumed: resumed}
	var total, files int64
	r.parts = make(map[*Partition]*partLive, len(plan))
	parts := make([]*partLive, 0, len(plan))
	for i := range plan {
		p := &plan[i]
		next := max(resumed[p.To][p.Partition], opts.FromOffset)
		pl := &partLive{topic: p.Topic, to: p.To, partition: p.Partition, from: next, end: next}
		pl.next.Store(next)
		for _, f := range p.Files {
			if f.Ranges.Max() > next && (opts.ToOffset <= 0 || f.Ranges[0][0] < opts.ToOffset) {
				total += f.Records
				files++
				pl.planned += f.Records
				pl.end = max(pl.end, f.Ranges.Max())
			}
		}
		if opts.ToOffset > 0 {
			pl.end = min(pl.end, max(opts.ToOffset, next))
		}
		r.parts[p] = pl
		parts = append(parts, pl)
	}
	live.setParts(parts)
	r.total.Store(total)
	r.filesTotal.Store(files)
	r.start.Store(start.UnixNano())
	stopProgress := r.reportProgress(ctx, start)
	err = r.restore(ctx, plan, resumed)
	stopProgress()
	res.Records, res.Bytes, res.Skipped, res.Txns = r.committed.Load(), r.committedBytes.Load(), r.skipped.Load(), r.txns.Load()
	res.Duration = time.Since(start)
	if err != nil && !r.crashed {
		// Best effort: a fenced or broken transaction is aborted by the
		// broker anyway (fencing, or the transaction timeout).
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = cl.AbortBufferedRecords(actx)
		_ = cl.EndTransaction(actx, kgo.TryAbort)
		cancel()
	}
	return res, err
}

// checkDestinations returns each DST topic's id, or a UsageError naming a
// DST that is missing or has too few partitions.
func checkDestinations(ctx context.Context, adm *kadm.Client, plan []Partition) (map[string][16]byte, error) {
	need := map[string]int32{}
	for _, p := range plan {
		need[p.To] = max(need[p.To], p.Partition+1)
	}
	var topics []string
	for t := range need {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	if len(topics) == 0 {
		return nil, nil
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata of %v: %w", topics, err)
	}
	ids := map[string][16]byte{}
	for _, t := range topics {
		td, ok := md.Topics[t]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			return nil, usagef("destination topic %s does not exist: create it with at least %d partitions (restore writes each record to the partition number it came from, and never creates topics)", t, need[t])
		case td.Err != nil:
			return nil, fmt.Errorf("destination topic %s: %w", t, td.Err)
		case int32(len(td.Partitions)) < need[t]:
			return nil, usagef("destination topic %s has %d partitions, and restore needs at least %d (it writes each record to the partition number it came from): add partitions or restore fewer with --partitions", t, len(td.Partitions), need[t])
		}
		ids[t] = td.ID
	}
	return ids, nil
}

// fetchProgress reads the group's committed offsets, stable ones only
// (no transaction of the group's offsets pending), by DST and partition.
func fetchProgress(ctx context.Context, adm *kadm.Client, group string, plan []Partition) (map[string]map[int32]int64, error) {
	out := map[string]map[int32]int64{}
	for _, p := range plan {
		if out[p.To] == nil {
			out[p.To] = map[int32]int64{}
		}
	}
	for {
		resp, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err == nil {
			err = resp.Error()
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			return out, nil // never committed: kfake's answer, where Kafka gives no offsets
		}
		if errors.Is(err, kerr.UnstableOffsetCommit) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the progress of restore group %s: %w", group, err)
		}
		for _, p := range plan {
			if o, ok := resp.Lookup(p.To, p.Partition); ok && o.At >= 0 {
				out[p.To][p.Partition] = o.At
			}
		}
		return out, nil
	}
}

type restorer struct {
	*Live    // the counters
	opts     Options
	st       readback.Reader
	cl       *kgo.Client
	ids      map[string][16]byte
	progress map[string]map[int32]int64 // next source offset, written in the open transaction
	parts    map[*Partition]*partLive   // each partition's counters, by the plan's partition
	txnParts []*partLive                // the partitions with records in the open transaction

	inTxn   bool
	txnRecs int64
	txnSize int64
	crashed bool // AfterProduce stopped the restore: leave all as a crash would

	produced int64 // handed to the producer

	errMu    sync.Mutex
	firstErr error
}

// batch is a run of records of one partition, read and checked, for the
// producing side.
type batch struct {
	p    *Partition
	recs []*kgo.Record
}

// Reading ahead overlaps decoding with producing and with the waits of a
// commit. It is bounded: readAheadBatches batches of at most
// readAheadBytes (plus the record that crossed the line) wait at once.
const (
	readAheadBatches = 4
	readAheadBytes   = 1 << 20
	readAheadRecords = 1024
)

// restore reads in one goroutine and produces in this one.
func (r *restorer) restore(ctx context.Context, plan []Partition, resumed map[string]map[int32]int64) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan batch, readAheadBatches)
	var readErr error
	go func() {
		defer close(ch)
		readErr = r.readAll(rctx, plan, resumed, ch)
	}()
	var err error
	for b := range ch {
		for _, rec := range b.recs {
			if err != nil {
				break
			}
			err = r.produce(ctx, b.p, rec)
		}
		if err != nil {
			cancel() // the reader stops; the loop drains what it sent
		}
	}
	// ch is closed: the reader has returned and readErr is set.
	switch {
	case err != nil:
		return err
	case readErr != nil:
		return readErr
	case r.inTxn:
		return r.commit(ctx)
	}
	return nil
}

// readPartitions is how many partitions are read at once: their batches
// interleave, so that a produce request carries several partitions, as a
// producer's does, and decoding uses more than one core.
const readPartitions = 4

// readAll reads the selected records of every partition of plan, each in
// order from its progress on, readPartitions partitions at once, and
// sends them in batches.
func (r *restorer) readAll(ctx context.Context, plan []Partition, resumed map[string]map[int32]int64, ch chan<- batch) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *Partition)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range min(readPartitions, len(plan)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				if err := r.readPartition(ctx, p, max(resumed[p.To][p.Partition], r.opts.FromOffset), ch); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := range plan {
		select {
		case jobs <- &plan[i]:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// readPartition reads one partition into batches.
func (r *restorer) readPartition(ctx context.Context, p *Partition, next int64, ch chan<- batch) error {
	b := batch{p: p}
	size := 0
	send := func() error {
		if len(b.recs) == 0 {
			return nil
		}
		select {
		case ch <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.parts[p].handed.Add(int64(len(b.recs)))
		b, size = batch{p: p}, 0
		return nil
	}
	err := r.partition(ctx, p, next, func(rec *kgo.Record) error {
		b.recs = append(b.recs, rec)
		size += len(rec.Key) + len(rec.Value)
		if size >= readAheadBytes || len(b.recs) >= readAheadRecords {
			return send()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := send(); err != nil {
		return err
	}
	r.parts[p].readToEnd.Store(true)
	return nil
}

// partition reads the records of p from next on, checks each against its
// file's ledger entry, and passes those selected to out, in offset order.
// Files whose offsets interleave (a name template with {{key}} or
// {{timestamp}} keeps several open per partition) are read at once and
// merged.
func (r *restorer) partition(ctx context.Context, p *Partition, next int64, out func(*kgo.Record) error) error {
	last := int64(-1)
	pl := r.parts[p]
	for _, group := range overlapping(p.Files) {
		if groupMax(group) <= next {
			continue
		}
		if r.opts.ToOffset > 0 && group[0].Ranges[0][0] >= r.opts.ToOffset {
			return nil
		}
		err := r.merge(ctx, group, func(rec *kgo.Record) error {
			if rec.Offset <= last {
				return fmt.Errorf("offset %d comes after %d: two files hold it, or a file is out of order", rec.Offset, last)
			}
			last = rec.Offset
			if pl.read.Add(1) == 1 {
				pl.firstRead.Store(time.Now().UnixNano())
			}
			if rec.Offset < next {
				r.skipped.Add(1)
				pl.skipped.Add(1)
				return nil
			}
			ts := rec.Timestamp.UnixMilli()
			if ts < r.opts.FromTime || r.opts.ToTime > 0 && ts >= r.opts.ToTime {
				r.skipped.Add(1)
				pl.skipped.Add(1)
				return nil
			}
			return out(rec)
		})
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("restore %s/%d: %w", p.Topic, p.Partition, err)
		}
		r.filesDone.Add(int64(len(group)))
	}
	return nil
}

// overlapping splits files, sorted by first offset, into groups whose
// offset spans overlap: each group is read apart, one after another.
func overlapping(files []File) [][]File {
	var groups [][]File
	hi := int64(-1)
	for _, f := range files {
		if len(groups) == 0 || f.Ranges[0][0] >= hi {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], f)
		hi = max(hi, f.Ranges.Max())
	}
	return groups
}

func groupMax(files []File) int64 {
	m := int64(-1)
	for _, f := range files {
		m = max(m, f.Ranges.Max())
	}
	return m
}

// fileCursor is one file of a merge: its records, pulled one at a time.
type fileCursor struct {
	f    File
	next func() (*kgo.Record, error, bool)
	stop func()
	head *kgo.Record
	n    int64 // records pulled
	last int64
}

var errPulled = errors.New("restore: the merge stopped reading")

// merge reads the files of a group at once and passes their records to fn
// in offset order, each checked against its file's ledger entry and its
// count. A group of one file is read straight through.
func (r *restorer) merge(ctx context.Context, group []File, fn func(*kgo.Record) error) error {
	bufSize := max(16<<10, (256<<10)/len(group))
	cursors := make([]*fileCursor, 0, len(group))
	defer func() {
		for _, c := range cursors {
			c.stop()
		}
	}()
	check := func(c *fileCursor, rec *kgo.Record) error {
		if !c.f.Ranges.Contains(rec.Offset) || rec.Offset <= c.last {
			return fmt.Errorf("%s: record %d has offset %d, which its ledger entry (offsets %s) or the order of the file does not allow: the file is damaged", c.f.Key, c.n, rec.Offset, fmtRanges(c.f.Ranges))
		}
		c.n++
		c.last = rec.Offset
		r.read.Add(1)
		return nil
	}
	counted := func(c *fileCursor) error {
		if c.n != c.f.Records {
			return fmt.Errorf("%s holds %d records, and its ledger entry says %d: the file is damaged or not the one the ledger names", c.f.Key, c.n, c.f.Records)
		}
		return nil
	}
	if len(group) == 1 {
		// One file: read straight through, without a coroutine per record.
		c := &fileCursor{f: group[0], last: -1}
		err := decode.File(ctx, r.st, c.f.Key, r.opts.ContentExts(c.f.Key), bufSize, func(rec *kgo.Record) error {
			if err := check(c, rec); err != nil {
				return err
			}
			if r.opts.ToOffset > 0 && rec.Offset >= r.opts.ToOffset {
				return errStop
			}
			return fn(rec)
		})
		if err != nil {
			return err
		}
		return counted(c)
	}
	pull := func(c *fileCursor) error {
		rec, err, ok := c.next()
		switch {
		case !ok:
			c.head = nil
			return counted(c)
		case err != nil:
			return fmt.Errorf("%s: %w", c.f.Key, err)
		}
		c.head = rec
		return check(c, rec)
	}
	for _, f := range group {
		key, exts := f.Key, r.opts.ContentExts(f.Key)
		seq := func(yield func(*kgo.Record, error) bool) {
			err := decode.File(ctx, r.st, key, exts, bufSize, func(rec *kgo.Record) error {
				if !yield(rec, nil) {
					return errPulled
				}
				return nil
			})
			if err != nil && !errors.Is(err, errPulled) {
				yield(nil, err)
			}
		}
		next, stop := iter.Pull2(seq)
		c := &fileCursor{f: f, next: next, stop: stop, last: -1}
		cursors = append(cursors, c)
		if err := pull(c); err != nil {
			return err
		}
	}
	for {
		var low *fileCursor
		for _, c := range cursors {
			if c.head != nil && (low == nil || c.head.Offset < low.head.Offset) {
				low = c
			}
		}
		if low == nil {
			return nil
		}
		rec := low.head
		if r.opts.ToOffset > 0 && rec.Offset >= r.opts.ToOffset {
			return errStop
		}
		if err := fn(rec); err != nil {
			return err
		}
		if err := pull(low); err != nil {
			return err
		}
	}
}

func (r *restorer) produce(ctx context.Context, p *Partition, rec *kgo.Record) error {
	if !r.inTxn {
		if err := r.cl.BeginTransaction(); err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
		r.inTxn = true
	}
	offset := rec.Offset
	if r.opts.OffsetHeader != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: r.opts.OffsetHeader, Value: strconv.AppendInt(nil, offset, 10)})
	}
	rec.Topic, rec.Partition, rec.Offset = p.To, p.Partition, 0
	size := int64(len(rec.Key) + len(rec.Value))
	for _, h := range rec.Headers {
		size += int64(len(h.Key) + len(h.Value))
	}
	// Produce blocks while the producer holds BufferBytes: a slow broker
	// stops the reading here.
	r.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		if err != nil {
			r.errMu.Lock()
			if r.firstErr == nil {
				r.firstErr = err
			}
			r.errMu.Unlock()
		}
	})
	if r.progress[p.To] == nil {
		r.progress[p.To] = map[int32]int64{}
	}
	r.progress[p.To][p.Partition] = offset + 1
	pl := r.parts[p]
	if pl.pendRecs == 0 {
		r.txnParts = append(r.txnParts, pl)
		pl.txn.Store(txnOpen)
	}
	pl.pendRecs++
	pl.pendBytes += size
	pl.pendNext = offset + 1
	r.txnRecs++
	r.txnSize += size
	r.produced++
	if r.opts.AfterProduce != nil {
		if err := r.opts.AfterProduce(r.produced); err != nil {
			r.crashed = true
			return err
		}
	}
	if r.txnSize >= r.opts.TxnBytes {
		return r.commit(ctx)
	}
	return nil
}

// commit ends the open transaction with the progress of what it holds:
// the records are flushed, the group's offsets added to the transaction,
// and both committed at once.
func (r *restorer) commit(ctx context.Context) error {
	for _, pl := range r.txnParts {
		pl.txn.Store(txnCommitting)
	}
	if err := r.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	r.errMu.Lock()
	perr := r.firstErr
	r.errMu.Unlock()
	if perr != nil {
		return r.txnErr("produce", perr)
	}
	id, epoch, err := r.cl.ProducerID(ctx)
	if err != nil {
		return r.txnErr("producer id", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = r.opts.Group, id, epoch, r.opts.Group
	addResp, err := add.RequestWith(ctx, r.cl)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		return r.txnErr("add the progress to the transaction", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = r.opts.Group, r.opts.Group, id, epoch
	req.Generation, req.MemberID = -1, ""
	for topic, parts := range r.progress {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID = topic, r.ids[topic]
		for p, next := range parts {
			tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			tp.Partition, tp.Offset, tp.LeaderEpoch = p, next, -1
			t.Partitions = append(t.Partitions, tp)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err == nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err = kerr.ErrorForCode(p.ErrorCode); err != nil {
					err = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
					break
				}
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return r.txnErr("commit the progress in the transaction", err)
	}
	if err := r.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return r.txnErr("commit the transaction", err)
	}
	r.inTxn = false
	r.txns.Add(1)
	r.committed.Add(r.txnRecs)
	r.committedBytes.Add(r.txnSize)
	r.txnRecs, r.txnSize = 0, 0
	clear(r.progress)
	for _, pl := range r.txnParts {
		pl.committed.Add(pl.pendRecs)
		pl.bytes.Add(pl.pendBytes)
		pl.next.Store(pl.pendNext)
		pl.pendRecs, pl.pendBytes = 0, 0
		pl.txn.Store(txnNone)
	}
	r.txnParts = r.txnParts[:0]
	return nil
}

func (r *restorer) txnErr(what string, err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return &FencedError{Group: r.opts.Group, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return fmt.Errorf("restore transaction (%s): %w", what, err)
}

// reportProgress writes a progress line every ProgressEvery until the
// returned func is called, which writes the last one.
func (r *restorer) reportProgress(ctx context.Context, start time.Time) func() {
	if r.opts.Progress == nil {
		return func() {}
	}
	every := r.opts.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	line := func() {
		el := time.Since(start).Seconds()
		s := r.Stats()
		eta := "-"
		if s.ETA > 0 {
			eta = s.ETA.Round(time.Second).String()
		}
		pct := 100.0
		if s.Total > 0 {
			pct = 100 * float64(min(s.Read, s.Total)) / float64(s.Total)
		}
		fmt.Fprintf(r.opts.Progress, "restore: %d/%d records read (%.1f%%), %d committed, %.0f records/s, %.1f MiB/s committed, ETA %s\n",
			s.Read, s.Total, pct, s.Committed, s.Rate, float64(s.CommittedBytes)/(1<<20)/max(el, 1e-9), eta)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				line()
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		line()
	}
}
