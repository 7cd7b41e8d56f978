package iceberg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/spillway/spillway/internal/iceberg/maintain"
)

// Summary properties Spillway writes on each snapshot it commits.
const (
	// PropOffsets is JSON {topic: {partition: end}}: per partition, the
	// first offset the table does not hold, merged with the previous
	// Spillway snapshot's, so that the newest one alone tells where the
	// table ends.
	PropOffsets = "spillway.offsets"
	// PropWriter is the id of the Spillway instance that committed.
	PropWriter = "spillway.writer"
	// PropGaps is JSON {topic: {partition: [[from, to], ...]}}: offsets
	// [from, to) this snapshot skips, because the ledger recorded them as
	// a gap (records gone from Kafka, or dropped by the error policy). Only
	// on snapshots that skip some.
	PropGaps = "spillway.gaps"
	// PropLedger is JSON {topic: {partition: seq}}: per partition, the
	// sequence number of the last ledger entry whose file the table
	// holds, merged with the previous Spillway snapshot's. It decides
	// which files are held: offsets can't, since consecutive files of a
	// partition split by day may end at the same handled offset.
	PropLedger = "spillway.ledger"
	// PropTopicIDs is JSON {topic: [id, older ids...]}: the Kafka topic id
	// whose ledger seqs and offsets PropLedger and PropOffsets record for
	// the topic, then those of the topic's earlier incarnations. A topic
	// deleted and recreated under its name starts its ledger seqs and
	// offsets again: its files must not be skipped as held, nor refused
	// as overlapping, for the seqs of the one before. Snapshots written
	// before it carry none; their records are taken as the live topic's.
	PropTopicIDs = "spillway.topic_ids"
)

// File is a data file Spillway stored, as the ledger describes it.
type File struct {
	Location  string // the data file's full URI, as the table's FileIO reads it
	Topic     string
	Partition int32
	// TopicID is the topic's Kafka id, as its ledger entry records it;
	// "" when unknown (the table then can't tell incarnations apart).
	TopicID    string
	First, End int64 // the offsets [First, End) the file holds
	// Seq is the file's ledger entry's sequence number: a partition's
	// files are committed in Seq order, and the table holds a file iff
	// its Seq is at most the partition's recorded in PropLedger.
	Seq     int64
	Records int64
	Bytes   int64
}

// Table is one Iceberg table. Its methods may be called from several
// goroutines: two Commits at once resolve as two instances' do, one of
// them reloading and retrying.
type Table struct {
	c     *Catalog
	name  string
	ident table.Identifier

	mu     sync.Mutex
	tbl    *table.Table // nil while the table does not exist
	writer string

	// beforeCommit, when set (by tests only), runs in each attempt after
	// the plan and before the catalog commit: where another writer's
	// commit makes this one conflict.
	beforeCommit func()
}

// Name is the table's "ns.table".
func (t *Table) Name() string { return t.name }

// Location is the table's location: its own once it exists, else the one
// Spillway will create it at.
func (t *Table) Location() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tbl != nil {
		return t.tbl.Location()
	}
	return t.c.Location(t.name)
}

// SetWriter sets the id recorded in each snapshot's PropWriter (the
// instance's client or host name); "" leaves it out.
func (t *Table) SetWriter(id string) {
	t.mu.Lock()
	t.writer = id
	t.mu.Unlock()
}

func (t *Table) exists() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tbl != nil
}

// refresh loads the table's current metadata from the catalog; it returns
// nil, nil when the table does not exist.
func (t *Table) refresh(ctx context.Context) (*table.Table, error) {
	tbl, err := t.c.cat.LoadTable(ctx, t.ident)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable), errors.Is(err, catalog.ErrNoSuchNamespace):
		tbl = nil
	case err != nil:
		return nil, fmt.Errorf("iceberg: load table %s: %w", t.name, t.c.scrub(err))
	}
	t.mu.Lock()
	t.tbl = tbl
	t.mu.Unlock()
	return tbl, nil
}

// Next returns, per partition of topic, the first offset the table's
// current snapshot does not hold, as the newest snapshot Spillway
// committed records it. A partition the table holds nothing of is absent.
// It reads the catalog afresh: another instance may have committed.
func (t *Table) Next(ctx context.Context, topic string) (map[int32]int64, error) {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, err
	}
	ends, err := tableEnds(tbl)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", t.name, err)
	}
	out := map[int32]int64{}
	maps.Copy(out, ends[topic])
	return out, nil
}

// Held returns, per partition of topic, the ledger seq of the last file
// the table's current snapshot holds (PropLedger): the ledger entries up
// to it are in the table, those after it are not. A partition the table
// holds nothing of is absent. It reads the catalog afresh.
func (t *Table) Held(ctx context.Context, topic string) (map[int32]int64, error) {
	return t.HeldOf(ctx, topic, "")
}

// HeldOf is Held for the incarnation of topic whose Kafka id is topicID:
// when the table records another (PropTopicIDs: the topic was deleted
// and recreated since), it holds nothing of this one. "" takes whatever
// the table records.
func (t *Table) HeldOf(ctx context.Context, topic, topicID string) (map[int32]int64, error) {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, err
	}
	st, err := tableState(tbl)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", t.name, err)
	}
	out := map[int32]int64{}
	if ids := st.ids[topic]; topicID != "" && len(ids) > 0 && ids[0] != topicID {
		return out, nil
	}
	maps.Copy(out, st.seqs[topic])
	return out, nil
}

// ends is {topic: {partition: end}}, or {topic: {partition: seq}}.
type ends map[string]map[int32]int64

// state is what the newest Spillway snapshot records.
type state struct {
	ends ends                // PropOffsets
	seqs ends                // PropLedger
	ids  map[string][]string // PropTopicIDs
}

func tableEnds(tbl *table.Table) (ends, error) {
	st, err := tableState(tbl)
	return st.ends, err
}

// tableState reads PropOffsets and PropLedger from the newest snapshot in
// the current snapshot's ancestry that has them: snapshots other engines
// commit (compaction, maintenance) carry none, and leave the records as
// they were.
func tableState(tbl *table.Table) (state, error) {
	out := state{ends: ends{}, seqs: ends{}, ids: map[string][]string{}}
	if tbl == nil {
		return out, nil
	}
	meta := tbl.Metadata()
	for s := meta.CurrentSnapshot(); s != nil; {
		if s.Summary != nil {
			if raw, ok := s.Summary.Properties[PropOffsets]; ok {
				if err := json.Unmarshal([]byte(raw), &out.ends); err != nil {
					return state{}, fmt.Errorf("snapshot %d: %s does not parse: %w", s.SnapshotID, PropOffsets, err)
				}
				if raw := s.Summary.Properties[PropLedger]; raw != "" {
					if err := json.Unmarshal([]byte(raw), &out.seqs); err != nil {
						return state{}, fmt.Errorf("snapshot %d: %s does not parse: %w", s.SnapshotID, PropLedger, err)
					}
				}
				if raw := s.Summary.Properties[PropTopicIDs]; raw != "" {
					if err := json.Unmarshal([]byte(raw), &out.ids); err != nil {
						return state{}, fmt.Errorf("snapshot %d: %s does not parse: %w", s.SnapshotID, PropTopicIDs, err)
					}
				}
				return out, nil
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return out, nil
}

// Backoff between commit attempts that lost to another instance.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 5 * time.Second
)

// Commit makes files visible in one snapshot, exactly once: a file whose
// ledger entry the table already holds (committed by an earlier attempt,
// or by another instance) is skipped, and the snapshot records the ledger
// seqs (PropLedger) and offsets (PropOffsets) it makes visible. Files are
// taken in ledger order per partition, whatever their order in files.
// A file that starts past the
// table's end is accepted: the ledger passes only files in order, so the
// offsets between are a gap it recorded; the snapshot notes it (PropGaps).
// A file that starts inside what the table holds but ends past it is
// refused: no snapshot can hold its records once.
//
// When another instance commits first, Commit reloads the table, applies
// the rule again and retries, with backoff, until ctx ends. With
// auto_create the first Commit creates the namespace and table from the
// first file's schema; with evolve_schema a file that adds optional
// columns adds them to the table first.
func (t *Table) Commit(ctx context.Context, files []File) error {
	if len(files) == 0 {
		return nil
	}
	files = slices.Clone(files)
	sort.SliceStable(files, func(i, j int) bool {
		a, b := files[i], files[j]
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Seq, b.Seq)) < 0
	})
	wait := retryMin
	for {
		err := t.commitOnce(ctx, files)
		if !errors.Is(err, errConflict) && !errors.Is(err, table.ErrCommitFailed) && !errors.Is(err, catalog.ErrTableAlreadyExists) {
			return err
		}
		// Another writer moved the table on: reload and decide again.
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("iceberg: commit to %s: %w (last conflict: %v)", t.name, context.Cause(ctx), err)
		case <-timer.C:
		}
		wait = min(2*wait, retryMax)
	}
}

// plan is what one commit attempt adds.
type plan struct {
	add  []File
	ends ends
	seqs ends
	ids  map[string][]string
	gaps map[string]map[int32][][2]int64
}

func cloneEnds(e ends) ends {
	out := ends{}
	for topic, m := range e {
		out[topic] = maps.Clone(m)
	}
	return out
}

func partOf(e ends, topic string) map[int32]int64 {
	m := e[topic]
	if m == nil {
		m = map[int32]int64{}
		e[topic] = m
	}
	return m
}

// planCommit applies the skip rule to files (sorted by ledger seq per
// partition) against the table's state: a file is held iff its seq is at
// most the partition's recorded one. Its offsets only check the order:
// a partition's files tile its handled offsets in ledger order, so a file
// that starts below the table's end would duplicate records.
func planCommit(cur state, files []File) (plan, error) {
	p := plan{ends: cloneEnds(cur.ends), seqs: cloneEnds(cur.seqs), ids: map[string][]string{}, gaps: map[string]map[int32][][2]int64{}}
	for topic, ids := range cur.ids {
		p.ids[topic] = slices.Clone(ids)
	}
	for _, f := range files {
		if err := p.incarnation(f); err != nil {
			return plan{}, err
		}
		// First == End is a file of an interleaved partition whose
		// lowest offset after it is still held by an open file.
		if f.End < f.First {
			return plan{}, fmt.Errorf("file %s ends (%d) before it starts (%d)", f.Location, f.End, f.First)
		}
		m, sm := partOf(p.ends, f.Topic), partOf(p.seqs, f.Topic)
		if last, ok := sm[f.Partition]; ok && f.Seq <= last {
			continue // already in the table
		}
		end, held := m[f.Partition]
		switch {
		case held && f.First < end:
			return plan{}, fmt.Errorf("file %s holds %s/%d offsets [%d, %d) but the table already holds up to %d: it can't be added without duplicating [%d, %d)",
				f.Location, f.Topic, f.Partition, f.First, f.End, end, f.First, end)
		case held && f.First > end:
			g := p.gaps[f.Topic]
			if g == nil {
				g = map[int32][][2]int64{}
				p.gaps[f.Topic] = g
			}
			g[f.Partition] = append(g[f.Partition], [2]int64{end, f.First})
		}
		m[f.Partition] = f.End
		sm[f.Partition] = f.Seq
		p.add = append(p.add, f)
	}
	return p, nil
}

// incarnation checks f's topic id against the one the table records for
// its topic. A table that records none (new, or written before
// PropTopicIDs) takes f's. A new id is the topic deleted and recreated:
// the table's seqs and offsets of the topic are the old incarnation's, so
// they are set aside (its files stay in the table) and the new one's
// start empty. A file of an incarnation the table has moved past is
// refused: a writer still running on the deleted topic.
func (p *plan) incarnation(f File) error {
	if f.TopicID == "" {
		return nil
	}
	ids := p.ids[f.Topic]
	switch {
	case len(ids) == 0:
		p.ids[f.Topic] = []string{f.TopicID}
	case ids[0] == f.TopicID:
	case slices.Contains(ids[1:], f.TopicID):
		return fmt.Errorf("file %s is of topic %s with id %s, which was deleted and recreated since: the table holds the files of its id %s", f.Location, f.Topic, f.TopicID, ids[0])
	default:
		p.ids[f.Topic] = append([]string{f.TopicID}, ids...)
		delete(p.ends, f.Topic)
		delete(p.seqs, f.Topic)
	}
	return nil
}

// commitOnce is one attempt: reload, plan, create or evolve, add. It
// returns table.ErrCommitFailed (wrapped) when another writer won.
func (t *Table) commitOnce(ctx context.Context, files []File) error {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return err
	}
	cur, err := tableState(tbl)
	if err != nil {
		return fmt.Errorf("iceberg: table %s: %w", t.name, err)
	}
	p, err := planCommit(cur, files)
	if err != nil {
		return fmt.Errorf("iceberg: commit to %s: %w (%w)", t.name, err, ErrRefused)
	}
	if len(p.add) == 0 {
		return nil
	}
	if tbl == nil {
		if !t.c.opts.AutoCreate {
			return fmt.Errorf("iceberg: table %s does not exist and iceberg.auto_create is false; create it, or set iceberg.auto_create: true (%w)", t.name, ErrRefused)
		}
		if tbl, err = t.create(ctx, p.add...); err != nil {
			return err
		}
	}
	if tbl.CurrentSnapshot() == nil {
		// Created here or by another instance, and not yet given the
		// files' field ids (a crash may come between).
		if tbl, err = t.adopt(ctx, tbl, p.add...); err != nil {
			return err
		}
	}
	if tbl, err = t.evolve(ctx, tbl, p.add); err != nil {
		if errors.Is(err, errConflict) {
			return err
		}
		return fmt.Errorf("%w (%w)", err, ErrRefused)
	}
	tx := tbl.NewTransaction()
	// Pin the branch head: on a conflict iceberg-go would otherwise
	// rebase this append onto the other writer's snapshot, past the skip
	// rule and with stale PropOffsets. Pinned, it fails with
	// ErrCommitFailed and Commit decides again.
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("iceberg: commit to %s: %w", t.name, err)
	}
	props, err := t.summary(p)
	if err != nil {
		return err
	}
	paths := make([]string, len(p.add))
	for i, f := range p.add {
		paths[i] = f.Location
	}
	// With the partition values Spillway knows (see package datafile).
	dfs, err := t.dataFiles(ctx, tbl, p.add)
	if err != nil {
		return err
	}
	// WithoutDuplicateCheck: the ledger seq rule above is what keeps a
	// file from being added twice; iceberg-go's own check would read every
	// manifest of the table on every commit.
	if err := tx.AddDataFiles(ctx, dfs, props, table.WithoutDuplicateCheck()); err != nil {
		return fmt.Errorf("iceberg: add %d files to %s: %w", len(paths), t.name, t.c.scrub(err))
	}
	if t.beforeCommit != nil {
		t.beforeCommit()
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		err = fmt.Errorf("iceberg: commit %d files to %s: %w", len(paths), t.name, t.c.scrub(err))
		// The catalogs report a lost race differently (the SQL catalog as
		// a failed requirement, REST as ErrCommitFailed); a head that
		// moved since the plan is the sign common to all. Retrying is
		// safe even if this commit went in after all: the next plan
		// skips its files.
		// The metadata file moves with the head, and with a schema
		// another writer evolved (which fails this commit's schema
		// requirement without a new snapshot).
		now, rerr := t.refresh(ctx)
		if rerr == nil && (headID(now) != headID(tbl) || now.MetadataLocation() != tbl.MetadataLocation()) {
			return fmt.Errorf("%w: %w", errConflict, err)
		}
		return err
	}
	// committed's catalog may be withSchema's: keep one of the real one.
	committed = table.New(t.ident, committed.Metadata(), committed.MetadataLocation(), committed.FS, t.c.cat)
	t.mu.Lock()
	t.tbl = committed
	t.mu.Unlock()
	return nil
}

// withSchema returns tbl as if next were already its current schema, for
// a transaction to append files that have next's new fields: the
// transaction's snapshot and manifests use next, and its catalog commit
// carries the schema change before the snapshot, with a requirement that
// the table's schema is still tbl's. The schema and the files become
// visible together or not at all: a crash can't leave a new column
// without the files that brought it.
//
// iceberg-go v0.7.0 has no other way to put this in one commit: the
// transaction's UpdateSchema numbers new fields itself (the table must
// keep the files' ids, see "Field ids" in docs/iceberg.md) and its
// apply, which takes any update, is unexported. So the catalog the
// transaction commits through adds them.
func (t *Table) withSchema(tbl *table.Table, next *iceberg.Schema) (*table.Table, error) {
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return nil, err
	}
	if err := b.AddSchema(next); err != nil {
		return nil, err
	}
	if err := b.SetCurrentSchemaID(-1); err != nil {
		return nil, err
	}
	meta, err := b.Build()
	if err != nil {
		return nil, err
	}
	cat := schemaCommit{
		CatalogIO: t.c.cat,
		reqs:      []table.Requirement{table.AssertCurrentSchemaID(tbl.Schema().ID)},
		updates:   []table.Update{table.NewAddSchemaUpdate(next), table.NewSetCurrentSchemaUpdate(-1)},
	}
	return table.New(t.ident, meta, tbl.MetadataLocation(), tbl.FS, cat), nil
}

// schemaCommit is a catalog whose commits carry a schema change first.
type schemaCommit struct {
	table.CatalogIO
	reqs    []table.Requirement
	updates []table.Update
}

func (c schemaCommit) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	return c.CatalogIO.CommitTable(ctx, ident, append(slices.Clone(c.reqs), reqs...), append(slices.Clone(c.updates), updates...))
}

// ErrRefused marks a commit the table can't take however often it is
// retried: a file that overlaps what the table holds, a schema change the
// table can't take, a missing table without auto_create.
var ErrRefused = errors.New("refused")

// errConflict is a commit that lost to another writer's.
var errConflict = errors.New("another writer committed first")

// headID is the table's current snapshot id, -1 for none.
func headID(tbl *table.Table) int64 {
	if tbl == nil {
		return -2
	}
	if s := tbl.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return -1
}

// summary renders the snapshot's summary properties.
func (t *Table) summary(p plan) (iceberg.Properties, error) {
	enc := func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}
	// JSON object keys must be strings; the partitions become "0", "1".
	byName := func(e ends) map[string]map[string]int64 {
		out := map[string]map[string]int64{}
		for topic, m := range e {
			o := map[string]int64{}
			for part, v := range m {
				o[strconv.Itoa(int(part))] = v
			}
			out[topic] = o
		}
		return out
	}
	s, err := enc(byName(p.ends))
	if err != nil {
		return nil, err
	}
	l, err := enc(byName(p.seqs))
	if err != nil {
		return nil, err
	}
	props := iceberg.Properties{PropOffsets: s, PropLedger: l}
	if len(p.ids) > 0 {
		if props[PropTopicIDs], err = enc(p.ids); err != nil {
			return nil, err
		}
	}
	if len(p.gaps) > 0 {
		if props[PropGaps], err = enc(p.gaps); err != nil {
			return nil, err
		}
	}
	t.mu.Lock()
	if t.writer != "" {
		props[PropWriter] = t.writer
	}
	t.mu.Unlock()
	return props, nil
}

// Current is what a table's current snapshot holds, for verify.
type Current struct {
	// Exists is false when the table does not exist (yet).
	Exists bool
	// Location is the table's location.
	Location string
	// Files are the current snapshot's data files, one per manifest
	// entry: a file added twice is listed twice.
	Files []string
	// Ends and Seqs are, per partition of the topic asked for, what the
	// newest Spillway snapshot records (PropOffsets, PropLedger).
	Ends, Seqs map[int32]int64
	// TopicIDs are the topic's Kafka ids Ends and Seqs are of, then its
	// earlier incarnations' (PropTopicIDs); empty when not recorded.
	TopicIDs []string
	// Referenced are the data files any snapshot of the table references
	// (older ones too), once each: files no orphan removal may touch.
	Referenced []string
}

// Current reads the table's current snapshot: its data files, as
// iceberg-go's scan plans them, and the offsets and ledger seqs Spillway
// recorded for topic. It reads the catalog afresh.
func (t *Table) Current(ctx context.Context, topic string) (Current, error) {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return Current{}, err
	}
	out := Current{Location: t.Location(), Ends: map[int32]int64{}, Seqs: map[int32]int64{}}
	if tbl == nil {
		return out, nil
	}
	out.Exists = true
	st, err := tableState(tbl)
	if err != nil {
		return Current{}, fmt.Errorf("iceberg: table %s: %w", t.name, err)
	}
	maps.Copy(out.Ends, st.ends[topic])
	maps.Copy(out.Seqs, st.seqs[topic])
	out.TopicIDs = slices.Clone(st.ids[topic])
	if tbl.CurrentSnapshot() == nil {
		return out, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return Current{}, fmt.Errorf("iceberg: list the data files of %s: %w", t.name, t.c.scrub(err))
	}
	for _, task := range tasks {
		out.Files = append(out.Files, task.File.FilePath())
	}
	fio, err := tbl.FS(ctx)
	if err != nil {
		return Current{}, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	if out.Referenced, err = maintain.Referenced(tbl, fio); err != nil {
		return Current{}, fmt.Errorf("iceberg: list the data files of %s's snapshots: %w", t.name, t.c.scrub(err))
	}
	return out, nil
}
