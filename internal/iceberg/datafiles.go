package iceberg

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/spillway/spillway/internal/iceberg/datafile"
	"github.com/spillway/spillway/internal/iceberg/tableschema"
)

// dataFiles builds the data file entries of files for tbl's current schema
// and spec (package datafile), reading each file through the FileIO as
// the manifest will name it (literalIO).
func (t *Table) dataFiles(ctx context.Context, tbl *table.Table, files []File) ([]iceberg.DataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	in := make([]datafile.File, len(files))
	for i, f := range files {
		in[i] = datafile.File{Location: f.Location, Partition: f.Partition}
	}
	dfs, err := datafile.Entries(ctx, datafile.Table{IO: literalIO{fs, tbl.Location()}, Meta: tbl, PartitionColumn: tableschema.PartitionColumn}, in)
	var refused *datafile.RefusedError
	switch {
	case errors.As(err, &refused):
		return nil, fmt.Errorf("iceberg: %s: %w (%w)", t.name, refused.Err, ErrRefused)
	case err != nil:
		return nil, fmt.Errorf("iceberg: %s: %w", t.name, t.c.scrub(err))
	}
	return dfs, nil
}
