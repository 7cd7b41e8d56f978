package iceberg

import (
	"context"
	"fmt"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/spillway/spillway/internal/iceberg/maintain"
)

// Files returns the table's files as its FileIO reads them, for removing
// orphans: the FileIO of the table as Catalog.Table or the last refresh
// loaded it, or its location's when the table does not exist, so that a
// run over many orphans loads the table once. It opens a location as the
// ledger names it (literalIO).
func (t *Table) Files(ctx context.Context) (*maintain.Files, error) {
	t.mu.Lock()
	tbl := t.tbl
	t.mu.Unlock()
	var fio iceio.IO
	var err error
	if tbl != nil {
		fio, err = tbl.FS(ctx)
	} else {
		fio, err = iceio.LoadFS(ctx, t.c.props, t.Location())
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	return maintain.NewFiles(literalIO{fio, t.Location()}, t.name, t.c.scrub), nil
}
