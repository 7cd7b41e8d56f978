package tableschema

import (
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Opener opens a data file by the location the manifest will name. It
// must open that object as written (package iceberg's literalIO), not
// resolve it against the table's location, or the schema read could be
// another file's.
type Opener interface {
	Open(location string) (iceio.File, error)
}

// ReadError is a data file that could not be opened or whose footer could
// not be read: a failure of storage, which a retry may pass, where the
// other errors of FileSchema are the file's content, which no retry
// changes.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// FileSchema reads the Iceberg schema of a Parquet data file from its
// footer, by the field ids it carries. A file without them is refused:
// Iceberg maps a file's columns to the table's by id, and a file that
// has none would be read by name mapping only, which Spillway's files do
// not need.
func FileSchema(fs Opener, location string) (*iceberg.Schema, int64, error) {
	f, err := fs.Open(location)
	if err != nil {
		return nil, 0, &ReadError{fmt.Errorf("open %s: %w", location, err)}
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, 0, &ReadError{fmt.Errorf("read the Parquet footer of %s: %w", location, err)}
	}
	defer rdr.Close()
	md := rdr.MetaData()
	root := md.Schema.Root()
	for i := range root.NumFields() {
		if n := root.Field(i); n.FieldID() < 0 {
			return nil, 0, fmt.Errorf("%s: column %q has no Iceberg field id; Spillway's writer must set field ids on every column to commit a file to a table", location, n.Name())
		}
	}
	if err := checkUnits(md.Schema); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", location, err)
	}
	as, err := pqarrow.FromParquet(md.Schema, &pqarrow.ArrowReadProperties{}, md.KeyValueMetadata())
	if err != nil {
		return nil, 0, fmt.Errorf("%s: schema: %w", location, err)
	}
	sc, err := table.ArrowSchemaToIceberg(as, false, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: schema: %w", location, err)
	}
	return sc, md.NumRows, nil
}

// checkUnits refuses time and timestamp columns in a unit other than
// microseconds. Iceberg's timestamp, timestamptz and time are microseconds
// (the spec maps them to Parquet's TIMESTAMP(MICROS) and TIME(MICROS)):
// iceberg-go would take a millisecond column's bounds for microseconds,
// and the file's day and hour partition values and the bounds that
// readers prune files by would be off by a factor of 1000.
func checkUnits(sc *pqschema.Schema) error {
	for i := range sc.NumColumns() {
		col := sc.Column(i)
		var unit pqschema.TimeUnitType
		switch lt := col.LogicalType().(type) {
		case *pqschema.TimestampLogicalType:
			unit = lt.TimeUnit()
		case pqschema.TimestampLogicalType:
			unit = lt.TimeUnit()
		case *pqschema.TimeLogicalType:
			unit = lt.TimeUnit()
		case pqschema.TimeLogicalType:
			unit = lt.TimeUnit()
		default:
			continue
		}
		if unit != pqschema.TimeUnitMicros {
			return fmt.Errorf("column %q is a time or timestamp in %s; Iceberg keeps them in microseconds, so Spillway's writer must write TIMESTAMP(MICROS) and TIME(MICROS) for a table", col.Path(), unitName(unit))
		}
	}
	return nil
}

func unitName(u pqschema.TimeUnitType) string {
	switch u {
	case pqschema.TimeUnitMillis:
		return "milliseconds"
	case pqschema.TimeUnitNanos:
		return "nanoseconds"
	}
	return "an unknown unit"
}
