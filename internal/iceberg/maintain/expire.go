// Package maintain keeps an Iceberg table's history and storage in
// bounds, as Iceberg's own maintenance procedures would: it expires old
// snapshots (expire_snapshots), lists the data files any snapshot still
// references, and stats and removes files through the table's FileIO, for
// the removal of orphaned files. It works on iceberg-go's table as the
// catalog loaded it, and knows nothing of Spillway's commits beyond the
// summary property that marks them.
package maintain

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
// defaults DefaultExpire returns.
type ExpireOptions struct {
	Enabled bool `koanf:"enabled"`
	// MaxAge: a snapshot older than this, and not among the KeepLast
	// newest, is expired. 0 expires every snapshot past KeepLast.
	MaxAge time.Duration `koanf:"max_age"`
	// KeepLast is how many of the newest snapshots are kept, whatever
	// their age; at least 1, the current one.
	KeepLast int `koanf:"keep_last"`
}

// DefaultExpire is Iceberg's defaults of the two table properties: 5 days
// and 1, on.
func DefaultExpire() ExpireOptions {
	return ExpireOptions{Enabled: true, MaxAge: 5 * 24 * time.Hour, KeepLast: 1}
}

// Validate adds to ps what is wrong with e, naming the keys under
// iceberg.expire_snapshots.
func (e ExpireOptions) Validate(ps *keycheck.List) {
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

// Expire expires the snapshots of tbl (loaded with a current snapshot)
// that o lets go, in a catalog commit of its own: never in a data commit,
// so a failed expiry can't take a data commit with it. It keeps the
// current snapshot and the newest one whose summary has the property
// mark (Spillway's: its summary says what the table holds), whatever o
// says. iceberg-go's ExpireSnapshots then deletes, through the table's
// FileIO, the manifest lists and manifests only the expired snapshots
// used, and the data files only they referenced: in a table only
// Spillway appends to there are none (every file it added is in the
// current snapshot); files another engine rewrote (compaction) go with
// their snapshots, as Iceberg's own expiry deletes them.
//
// It returns the table as the catalog took the commit (nil when there
// was no commit) and how many snapshots it expired. A commit that loses
// to another writer's expires nothing (the next expiry tries again) and
// returns nil, 0, nil. An error with a table: the catalog took the
// commit, but deleting the expired snapshots' files failed; they are
// left behind, never a file the table reads. The caller adds the table's
// name to an error.
func Expire(ctx context.Context, tbl *table.Table, o ExpireOptions, mark string) (*table.Table, int, error) {
	keep := max(o.KeepLast, depth(tbl.Metadata(), mark)+1)
	before := len(tbl.Metadata().Snapshots())
	if before <= keep {
		return nil, 0, nil // nothing to expire: no catalog round trip
	}
	tx := tbl.NewTransaction()
	// Pinned: iceberg-go would otherwise replay the removal on top of
	// another writer's new head, past the keep rule above.
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, 0, err
	}
	if err := tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(o.MaxAge)); err != nil {
		return nil, 0, err
	}
	after, err := tx.Commit(ctx)
	if errors.Is(err, table.ErrCommitFailed) {
		return nil, 0, nil
	}
	if after == nil {
		return nil, 0, err
	}
	return after, before - len(after.Metadata().Snapshots()), err
}

// depth is how many snapshots of the current one's ancestry come before
// the newest one whose summary has the property mark (0: the current one
// has it); without any, the whole ancestry's length.
func depth(meta table.Metadata, mark string) int {
	d := 0
	for s := meta.CurrentSnapshot(); s != nil; d++ {
		if s.Summary != nil {
			if _, ok := s.Summary.Properties[mark]; ok {
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
