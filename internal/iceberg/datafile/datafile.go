// Package datafile builds the manifest entries of the data files
// Spillway registers in an Iceberg table: record count, size and column
// statistics from each file's Parquet footer, and partition values from
// the folders Spillway named the file by, checked against the file's
// column bounds. It reads files through the FileIO it is given and knows
// nothing of the commit that adds the entries.
package datafile

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
)

// Data files are registered with their partition values as Spillway knows
// them, not as iceberg-go's AddFiles would derive them from the files'
// column bounds: a bucket of the key can't be read from bounds (a hash
// keeps no order, and the key column has none), and the Kafka partition
// is no column of the file. Spillway named each file from the values its
// records share (see tablepath.PartitionPath): its Kafka partition, its
// day or hour, its key's bucket, one Hive-style "field=value" folder each,
// so the file's path says them. The ledger's partition is checked against
// the path, and a time value against the file's bounds, so a file that
// doesn't hold what its path says is refused, naming the field.

// statsWorkers bounds the footers read at once: each is a ranged read of
// the file's tail, a round trip to object storage.
const statsWorkers = 8

// File is a data file to register: its location, as the manifest will
// name it, and the Kafka partition its records are of.
type File struct {
	Location  string
	Partition int32
}

// Table is what the entries are built for.
type Table struct {
	// IO opens a location as the manifests name it, literally.
	IO iceio.IO
	// Meta gives the schema, partition spec and properties.
	Meta *table.Table
	// PartitionColumn is the column of the Kafka partition: its
	// identity partition value is File.Partition, which the file's
	// folder must agree with, not a value of the file's records.
	PartitionColumn string
}

// RefusedError is a file whose entry can't be built however often it is
// tried: its folders don't say a value of each partition field, or its
// records contradict them, or the spec has a transform Spillway doesn't
// lay files out by. Any other error of Entries is reading a footer.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Entries builds the data file entries of files for t's current schema
// and spec: record count, size and column statistics from each file's
// Parquet footer (iceberg-go's reading of it, as AddFiles does), partition
// values from what Spillway wrote the file for. Footers are read in
// parallel.
func Entries(ctx context.Context, t Table, files []File) ([]iceberg.DataFile, error) {
	sc, spec, props := t.Meta.Schema(), t.Meta.Spec(), t.Meta.Properties()
	out := make([]iceberg.DataFile, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(statsWorkers)
	for i, f := range files {
		g.Go(func() error {
			// Unpartitioned: the statistics only; the partition values
			// are ours.
			st, err := table.FileToDataFile(gctx, t.IO, f.Location, sc, *iceberg.UnpartitionedSpec, 0, props)
			if err != nil {
				return fmt.Errorf("read the statistics of %s: %w", f.Location, err)
			}
			nested, err := nestedBounds(t.IO, f.Location, sc, spec)
			if err != nil {
				return fmt.Errorf("read the statistics of %s: %w", f.Location, err)
			}
			df, err := buildDataFile(sc, spec, t.PartitionColumn, f, st, nested...)
			if err != nil {
				return &RefusedError{Err: err}
			}
			out[i] = df
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
