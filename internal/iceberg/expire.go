package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/spillway/spillway/internal/iceberg/maintain"
)

// ExpireOptions is iceberg.expire_snapshots (package maintain).
type ExpireOptions = maintain.ExpireOptions

// Expire expires the table's snapshots that iceberg.expire_snapshots
// lets go (maintain.Expire), keeping the newest one Spillway committed,
// whose summary tableState reads, and takes the table the catalog
// returned as the one it knows. It returns how many snapshots it
// expired; 0, nil when another writer's commit won.
func (t *Table) Expire(ctx context.Context) (int, error) {
	o := t.c.opts.ExpireSnapshots
	if !o.Enabled {
		return 0, nil
	}
	tbl, err := t.refresh(ctx)
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		return 0, err
	}
	after, n, err := maintain.Expire(ctx, tbl, o, PropOffsets)
	if after != nil {
		t.mu.Lock()
		t.tbl = table.New(t.ident, after.Metadata(), after.MetadataLocation(), after.FS, t.c.cat)
		t.mu.Unlock()
	}
	if err != nil {
		return n, fmt.Errorf("iceberg: expire snapshots of %s: %w", t.name, t.c.scrub(err))
	}
	return n, nil
}
