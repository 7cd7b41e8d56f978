package tables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
)

// Options are the Committer's settings.
type Options struct {
	// Table is iceberg.table; {{topic}} is rendered per topic.
	Table string
	// Base is prepended to a ledger entry's file key to give the file's
	// URI: storage.url without its query, and "/".
	Base string
	// Location, when set, is where Spillway writes table name's files
	// (the config's layout): a catalog that puts the table elsewhere is
	// refused, since its files would be outside the table.
	Location func(name string) string
	// Interval is iceberg.commit_interval: a file waits at most this
	// long (plus the commit) before a snapshot holds it.
	Interval time.Duration
	// MaxPendingBytes commits before Interval once the files waiting
	// hold this many bytes (VolumeFactor × file.max_bytes).
	MaxPendingBytes int64
	// MinBackoff and MaxBackoff bound the wait before retrying a failed
	// commit or catch-up; 0 takes 1s and 1m.
	MinBackoff, MaxBackoff time.Duration
}

// VolumeFactor is how many full files (file.max_bytes) may wait before a
// commit comes early: a high-volume table gets a snapshot every few
// files, not one per file (each snapshot costs a manifest list and a
// manifest, and readers plan over all of them), and does not lag
// commit_interval behind either.
const VolumeFactor = 4

// Committer commits stored files to their tables. Published, Assigned
// and Dropped may be called from any goroutine and never block on I/O;
// Run does the catalog's work on one goroutine; Close, after Run returned,
// commits what is left.
type Committer struct {
	cat Catalog
	led Ledger
	o   Options
	log *slog.Logger

	mu    sync.Mutex
	parts map[offsets.TopicPartition]*part
	// dropped are partitions no longer owned here whose files, caught up
	// and published, wait for a commit: a graceful stop or a rebalance
	// revokes after the sink stored them, and they still belong in the
	// table. Committed, they go.
	dropped []*part
	// catchups are the partitions assigned and not yet caught up.
	catchups []*part
	err      error // the first permanent error
	wake     chan struct{}

	// Run's goroutine (then Close's) only.
	tables map[string]Table
	// topics is the topic each table rendered from {{topic}} holds: two
	// topics that one table name renders (orders.v1 and orders_v1) are
	// refused, not mixed.
	topics map[string]string
}

// part is an assigned partition's queue. A new assignment replaces it,
// so a catch-up or commit of an earlier one is recognised by pointer.
type part struct {
	tp offsets.TopicPartition
	id ledger.Identity
	// ready: pending holds every ledger entry the table lacks; before,
	// only the sink's, which must wait behind the catch-up's.
	ready   bool
	pending []ledger.Entry // in seq order, no seq twice
	since   time.Time      // when the oldest pending entry came
}

// New returns a Committer of cat's tables, catching up from led.
func New(cat Catalog, led Ledger, o Options, log *slog.Logger) *Committer {
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	return &Committer{cat: cat, led: led, o: o, log: log, parts: map[offsets.TopicPartition]*part{}, wake: make(chan struct{}, 1), tables: map[string]Table{}, topics: map[string]string{}}
}

func (c *Committer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Published queues a stored file: sink.Config.Published. Entries without
// a file (gaps only) have nothing to commit.
func (c *Committer) Published(tp offsets.TopicPartition, e ledger.Entry) {
	if !e.HasFile() {
		return
	}
	c.mu.Lock()
	p := c.parts[tp]
	full := false
	if p != nil {
		p.add([]ledger.Entry{e})
		full = p.ready && c.pendingLocked() >= c.o.MaxPendingBytes && c.o.MaxPendingBytes > 0
	}
	c.mu.Unlock()
	// A partition not assigned here (dropped meanwhile) is its next
	// owner's to catch up.
	if full {
		c.poke()
	}
}

// add merges es into p's queue in seq order, each seq once.
func (p *part) add(es []ledger.Entry) {
	if len(p.pending) == 0 && len(es) > 0 {
		p.since = time.Now()
	}
	for _, e := range es {
		i, found := sort.Find(len(p.pending), func(i int) int { return int(e.Seq - p.pending[i].Seq) })
		if !found {
			p.pending = slices.Insert(p.pending, i, e)
		}
	}
	// An entry the next one does not count as stored is void: its writer
	// died before publishing its file, and the writer that resumed after
	// it wrote the same offsets again, often under the same name. Adding
	// both would put those offsets in the table twice (the table refuses
	// the second, and the run could not go on).
	var void []int64
	for i := 0; i+1 < len(p.pending); i++ {
		if e, next := &p.pending[i], &p.pending[i+1]; next.Seq == e.Seq+1 && voidBefore(e, next) {
			void = append(void, e.Seq)
		}
	}
	if len(void) > 0 {
		p.pending = slices.DeleteFunc(p.pending, func(e ledger.Entry) bool { return slices.Contains(void, e.Seq) })
	}
}

// voidBefore reports whether entry e, followed by next in its partition's
// ledger, is void: next's writer did not count e's file as stored.
func voidBefore(e, next *ledger.Entry) bool {
	return e.HasFile() && len(next.Before.Ranges().Overlap(e.File.Ranges)) == 0
}

func (c *Committer) pendingLocked() int64 {
	var n int64
	for _, p := range c.waiting() {
		if p.ready {
			for _, e := range p.pending {
				n += e.File.Bytes
			}
		}
	}
	return n
}

// Assigned starts tp, whose ledger is id's: its catch-up runs before any
// of its files is committed. The source's Assign calls it.
func (c *Committer) Assigned(tp offsets.TopicPartition, id ledger.Identity) {
	c.mu.Lock()
	p := &part{tp: tp, id: id}
	c.parts[tp] = p
	c.catchups = append(c.catchups, p)
	c.mu.Unlock()
	c.poke()
}

// Dropped forgets partitions no longer owned here: no more of their files
// come, and their next owner catches up from the ledger. The files already
// waiting are still committed (a graceful stop revokes every partition
// before the last commit): in ledger order after what the table holds of
// the partition, as the new owner's catch-up commits them, so whichever
// commits first, the other's copy is skipped. A partition whose catch-up
// has not run yet (a run stopped soon after it started) still gets it, up
// to its own last file: otherwise a graceful stop's last snapshot would
// lack the files it stored, until the next start.
func (c *Committer) Dropped(tps map[offsets.TopicPartition]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range tps {
		if p := c.parts[tp]; p != nil && len(p.pending) > 0 {
			c.dropped = append(c.dropped, p)
		}
		delete(c.parts, tp)
	}
}

// waiting are the partitions whose files may be committed: the assigned
// ones and the dropped ones. c.mu held.
func (c *Committer) waiting() []*part {
	out := make([]*part, 0, len(c.parts)+len(c.dropped))
	for _, p := range c.parts {
		out = append(out, p)
	}
	return append(out, c.dropped...)
}

// Err is the first permanent error, which stops the run.
func (c *Committer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Run catches up and commits until ctx ends or a permanent error, which it
// returns.
func (c *Committer) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		err := c.step(ctx, false)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrPermanent):
			return c.fail(err)
		case err != nil:
			backoff = min(max(2*backoff, c.o.MinBackoff), c.o.MaxBackoff)
			c.log.Warn("iceberg: commit failed; retrying (the files stay in the ledger, nothing is lost)", "err", err, "retry_in", backoff)
		default:
			backoff = 0
		}
		wait := c.nextDue()
		if backoff > 0 {
			wait = backoff
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
			if backoff > 0 {
				// A wake does not cut a backoff short.
				select {
				case <-ctx.Done():
					return nil
				case <-timer.C:
				}
			}
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (c *Committer) fail(err error) error {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	return err
}

// nextDue is how long until the oldest waiting file is due.
func (c *Committer) nextDue() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	wait := c.o.Interval
	for _, p := range c.waiting() {
		if p.ready && len(p.pending) > 0 {
			wait = min(wait, max(time.Until(p.since.Add(c.o.Interval)), 0))
		}
	}
	return max(wait, time.Millisecond)
}

// Close commits, after Run returned, what is waiting, catching up first
// where an assignment has not: the graceful stop's last snapshot. It
// retries what may pass until ctx ends.
func (c *Committer) Close(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		err := c.step(ctx, true)
		if err == nil || errors.Is(err, ErrPermanent) {
			return err
		}
		backoff = min(max(2*backoff, c.o.MinBackoff), c.o.MaxBackoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("iceberg: the last commit did not succeed before the deadline (the next start commits the files from the ledger): %w", err)
		case <-time.After(backoff):
		}
	}
}

// step runs the catch-ups waiting, then commits what is due (all, with
// force).
func (c *Committer) step(ctx context.Context, force bool) error {
	if err := c.catchUp(ctx); err != nil {
		return err
	}
	return c.commit(ctx, force)
}

// table opens table name once, refusing a catalog that puts it where
// Spillway does not write.
func (c *Committer) table(ctx context.Context, name string) (Table, error) {
	if t, ok := c.tables[name]; ok {
		return t, nil
	}
	if c.o.Location != nil {
		if got, want := c.cat.Location(name), c.o.Location(name); got != want {
			return nil, fmt.Errorf("iceberg: the catalog puts table %s at %s, but Spillway writes its files to %s (storage.url, storage.prefix and iceberg.catalog.warehouse): set iceberg.catalog.warehouse to the catalog's warehouse, under storage.prefix: %w", name, got, want, ErrPermanent)
		}
	}
	t, err := c.cat.Table(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", name, err)
	}
	c.tables[name] = t
	return t, nil
}

// tableOf is topic's table name, or an error (ErrPermanent) when another
// topic renders the same name: config check refuses that of kafka.topics,
// and this catches topics kafka.topic_regex finds.
func (c *Committer) tableOf(topic string) (string, error) {
	name := TableName(c.o.Table, topic)
	if !strings.Contains(c.o.Table, "{{topic}}") {
		return name, nil
	}
	if o, ok := c.topics[name]; ok && o != topic {
		return "", fmt.Errorf("iceberg: topics %s and %s are both table %s under iceberg.table %s (a topic's dots become \"_\" in a table name), and one table can't hold two topics; consume one of them only (kafka.topics or kafka.topic_regex), or give the other its own deployment with another iceberg.table: %w", o, topic, name, c.o.Table, ErrPermanent)
	}
	c.topics[name] = topic
	return name, nil
}

// catchUp queues, for each partition assigned since, the ledger entries
// past what its table holds, in ledger order and before the sink's.
//
// The table holds a prefix of the partition's ledger, and Held is the
// seq of its last file: the entries after it are queued. The ledger is
// read backwards from its last entry, so a catch-up reads the entries the
// table lacks, and one more.
func (c *Committer) catchUp(ctx context.Context) error {
	for {
		c.mu.Lock()
		if len(c.catchups) == 0 {
			c.mu.Unlock()
			return nil
		}
		p := c.catchups[0]
		c.mu.Unlock()
		es, err := c.missing(ctx, p)
		if err != nil {
			return fmt.Errorf("iceberg: catching %s/%d up from the ledger: %w", p.tp.Topic, p.tp.Partition, err)
		}
		c.mu.Lock()
		c.catchups = c.catchups[1:]
		owned := c.parts[p.tp] == p // not dropped or assigned again meanwhile
		if !owned && slices.Contains(c.dropped, p) {
			// Dropped with files of its own waiting: caught up to the
			// last of them, not to what a new owner wrote since.
			last := p.pending[len(p.pending)-1].Seq
			es = slices.DeleteFunc(es, func(e ledger.Entry) bool { return e.Seq > last })
			owned = true
		}
		if owned {
			p.add(es)
			p.ready = true
			if len(es) > 0 {
				c.log.Info("iceberg: catching up from the ledger", "topic", p.tp.Topic, "partition", p.tp.Partition, "files", len(es))
			}
		}
		c.mu.Unlock()
	}
}

// missing reads p's ledger entries with a file that its table may lack,
// oldest first.
func (c *Committer) missing(ctx context.Context, p *part) ([]ledger.Entry, error) {
	name, err := c.tableOf(p.tp.Topic)
	if err != nil {
		return nil, err
	}
	t, err := c.table(ctx, name)
	if err != nil {
		return nil, err
	}
	seqs, err := t.Held(ctx, p.tp.Topic, p.id.TopicID)
	if err != nil {
		return nil, err
	}
	held, any := seqs[p.tp.Partition]
	e, err := c.led.Last(ctx, p.id)
	if err != nil {
		return nil, err
	}
	var out []ledger.Entry
	last := true
	for e != nil {
		if any && e.Seq <= held {
			break
		}
		if e.HasFile() {
			stored := true
			if last {
				// The last entry's file may be void (its writer died
				// before publishing it, and whoever resumes writes its
				// offsets again) or still on its way (Published brings
				// it then): either way not to be committed from here.
				// An earlier void entry is dropped by part.add, beside
				// the entry after it.
				if stored, err = c.led.Stored(ctx, e); err != nil {
					return nil, err
				}
			}
			if stored {
				out = append(out, *e)
			}
		}
		last = false
		if e.Seq == 0 {
			break
		}
		// Seqs are contiguous from 0: an append that failed stopped the
		// run before any later one.
		prev, err := c.led.Read(ctx, p.id, c.led.EntryKey(p.id, e.Seq-1))
		if err != nil {
			return nil, err
		}
		e = prev
	}
	slices.Reverse(out)
	return out, nil
}

// commit commits the due files of ready partitions, one snapshot per
// table, each partition's in ledger order. A partition's files are due
// when its oldest waited Interval, or all of them with force or once the
// files waiting pass MaxPendingBytes.
func (c *Committer) commit(ctx context.Context, force bool) error {
	type batch struct {
		files []File
		taken map[*part]int
	}
	c.mu.Lock()
	all := force || (c.o.MaxPendingBytes > 0 && c.pendingLocked() >= c.o.MaxPendingBytes)
	batches := map[string]*batch{}
	for _, p := range c.waiting() {
		if !p.ready || len(p.pending) == 0 || (!all && time.Since(p.since) < c.o.Interval) {
			continue
		}
		name, err := c.tableOf(p.tp.Topic)
		if err != nil {
			c.mu.Unlock()
			return err
		}
		b := batches[name]
		if b == nil {
			b = &batch{taken: map[*part]int{}}
			batches[name] = b
		}
		for i := range p.pending {
			b.files = append(b.files, fileOf(c.o.Base, &p.pending[i]))
		}
		b.taken[p] = len(p.pending)
	}
	c.mu.Unlock()
	names := make([]string, 0, len(batches))
	for n := range batches {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		b := batches[name]
		t, err := c.table(ctx, name)
		if err != nil {
			return err
		}
		if err := t.Commit(ctx, b.files); err != nil {
			return fmt.Errorf("iceberg: committing %d files to %s: %w", len(b.files), name, err)
		}
		c.mu.Lock()
		for p, n := range b.taken {
			p.pending = p.pending[n:]
			if len(p.pending) > 0 {
				p.since = time.Now()
			}
		}
		c.dropped = slices.DeleteFunc(c.dropped, func(p *part) bool { return len(p.pending) == 0 })
		c.mu.Unlock()
		c.log.Debug("iceberg: committed", "table", name, "files", len(b.files))
		c.expire(ctx, name, t)
	}
	return nil
}

// Expirer is a Table that expires old snapshots (iceberg.expire_snapshots).
type Expirer interface {
	// Expire expires, in a catalog commit of its own, the snapshots the
	// options let go, never the current one nor the newest whose summary
	// Held reads; it returns how many.
	Expire(ctx context.Context) (int, error)
}

// expire runs t's snapshot expiry after a data commit. Its failure is
// logged, never returned: the data commit stands, and the next commit's
// expiry tries again.
func (c *Committer) expire(ctx context.Context, name string, t Table) {
	ex, ok := t.(Expirer)
	if !ok {
		return
	}
	n, err := ex.Expire(ctx)
	if err != nil {
		c.log.Warn("iceberg: expiring old snapshots failed; the next commit tries again", "table", name, "err", err)
	}
	if n > 0 {
		c.log.Debug("iceberg: expired snapshots", "table", name, "snapshots", n)
	}
}
