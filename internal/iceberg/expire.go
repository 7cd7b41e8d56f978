package iceberg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/spillway/spillway/internal/keycheck"
)

// ExpireOptions is iceberg.expire_snapshots: the snapshots Spillway
// expires after each of its commits, as Iceberg's own expire_snapshots
// would with the table properties history.expire.max-snapshot-age-ms
// (MaxAge) and history.expire.min-snapshots-to-keep (KeepLast), whose
// defaults these are: 5 days and 1.
type ExpireOptions struct {
	Enabled bool `koanf:"enabled"`
	// MaxAge: a snapshot older than this, and not among the KeepLast
	// newest, is expired. 0 expires every snapshot past KeepLast.
	MaxAge time.Duration `koanf:"max_age"`
	// KeepLast is how many of the newest snapshots are kept, whatever
	// their age; at least 1, the current one.
	KeepLast int `koanf:"keep_last"`
}

// defaultExpire is Iceberg's defaults of the two table properties.
var defaultExpire = ExpireOptions{Enabled: true, MaxAge: 5 * 24 * time.Hour, KeepLast: 1}

func (e ExpireOptions) validate(ps *keycheck.List) {
	if !e.Enabled {
		return
	}
	if e.MaxAge < 0 {
		ps.Add("iceberg.expire_snapshots.max_age", e.MaxAge.String(), "must not be negative; use a duration such as 120h (0 keeps only iceberg.expire_snapshots.keep_last), or set iceberg.expire_snapshots.enabled: false")
	}
	if e.KeepLast < 1 {
		ps.Add("iceberg.expire_snapshots.keep_last", fmt.Sprint(e.KeepLast), "must be at least 1: the current snapshot is always kept; or set iceberg.expire_snapshots.enabled: false")
	}
}

// Expire expires the table's snapshots that iceberg.expire_snapshots
// lets go, in a catalog commit of its own: never in a data commit, so a
// failed expiry can't take a data commit with it. It keeps the current
// snapshot and the newest one Spillway committed (whose summary says
// what the table holds: tableState reads it), whatever the options say.
// iceberg-go's ExpireSnapshots then deletes, through the table's FileIO,
// the manifest lists and manifests only the expired snapshots used, and
// the data files only they referenced: in a table only Spillway appends
// to there are none (every file it added is in the current snapshot);
// files another engine rewrote (compaction) go with their snapshots, as
// Iceberg's own expiry deletes them.
//
// It returns how many snapshots it expired. A commit that loses to
// another writer's expires nothing (the next commit's expiry tries
// again) and returns 0, nil.
func (t *Table) Expire(ctx context.Context) (int, error) {
	o := t.c.opts.ExpireSnapshots
	if !o.Enabled {
		return 0, nil
	}
	tbl, err := t.refresh(ctx)
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		return 0, err
	}
	keep := max(o.KeepLast, spillwayDepth(tbl.Metadata())+1)
	before := len(tbl.Metadata().Snapshots())
	if before <= keep {
		return 0, nil // nothing to expire: no catalog round trip
	}
	tx := tbl.NewTransaction()
	// Pinned: iceberg-go would otherwise replay the removal on top of
	// another writer's new head, past the keep rule above.
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return 0, fmt.Errorf("iceberg: expire snapshots of %s: %w", t.name, err)
	}
	if err := tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(o.MaxAge)); err != nil {
		return 0, fmt.Errorf("iceberg: expire snapshots of %s: %w", t.name, t.c.scrub(err))
	}
	after, err := tx.Commit(ctx)
	if errors.Is(err, table.ErrCommitFailed) {
		return 0, nil
	}
	n := 0
	if after != nil {
		n = before - len(after.Metadata().Snapshots())
		t.mu.Lock()
		t.tbl = table.New(t.ident, after.Metadata(), after.MetadataLocation(), after.FS, t.c.cat)
		t.mu.Unlock()
	}
	if err != nil {
		// After the catalog took it, the deletes of the expired
		// snapshots' files may fail: they are left behind, never a
		// file the table reads.
		return n, fmt.Errorf("iceberg: expire snapshots of %s: %w", t.name, t.c.scrub(err))
	}
	return n, nil
}

// spillwayDepth is how many snapshots of the current one's ancestry come
// before the newest Spillway snapshot (0: the current one is Spillway's),
// as tableState walks them; without any, the whole ancestry's length.
func spillwayDepth(meta table.Metadata) int {
	d := 0
	for s := meta.CurrentSnapshot(); s != nil; d++ {
		if s.Summary != nil {
			if _, ok := s.Summary.Properties[PropOffsets]; ok {
				return d
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return d
}
