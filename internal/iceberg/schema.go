package iceberg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// fileSchema reads the Iceberg schema of a Parquet data file from its
// footer, by the field ids it carries. A file without them is refused:
// Iceberg maps a file's columns to the table's by id, and a file that
// has none would be read by name mapping only, which Spillway's files do
// not need.
func fileSchema(fs iceio.IO, location string) (*iceberg.Schema, int64, error) {
	f, err := fs.Open(ioLocation(location)) // the file the manifest names
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", location, err)
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, 0, fmt.Errorf("read the Parquet footer of %s: %w", location, err)
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

// create makes the namespace and the table from the schema of the first
// of files that has partition_by's columns, with the partition spec of
// partition_by, at Catalog.Location. A file of an older value schema may
// lack an optional value field the table is partitioned by; its records
// are in that field's null partition, and a later file's schema has it.
// Another instance may create it first: then the error wraps
// catalog.ErrTableAlreadyExists and Commit reloads.
func (t *Table) create(ctx context.Context, files ...File) (*table.Table, error) {
	loc := t.c.Location(t.name)
	fs, err := iceio.LoadFS(ctx, t.c.props, loc)
	if err != nil {
		return nil, fmt.Errorf("iceberg: create %s: FileIO for %s: %w", t.name, loc, t.c.scrub(err))
	}
	var sc *iceberg.Schema
	var spec iceberg.PartitionSpec
	for i, f := range files {
		fsc, _, err := fileSchema(fs, f.Location)
		if err != nil {
			return nil, fmt.Errorf("iceberg: create %s: %w (%w)", t.name, err, ErrRefused)
		}
		if fsc, err = tableSchema(t.c.opts.PartitionBy, fsc); err != nil {
			return nil, fmt.Errorf("iceberg: create %s: %w (%w)", t.name, err, ErrRefused)
		}
		if spec, err = partitionSpec(t.c.opts.PartitionBy, fsc); err != nil {
			if i < len(files)-1 {
				continue // another file may have the column
			}
			return nil, fmt.Errorf("iceberg: create %s: %w (%w)", t.name, err, ErrRefused)
		}
		sc = fsc
		break
	}
	ns := catalog.NamespaceFromIdent(t.ident)
	if err := t.c.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("iceberg: create namespace %s: %w", strings.Join(ns, "."), t.c.scrub(err))
	}
	tbl, err := t.c.cat.CreateTable(ctx, t.ident, sc, catalog.WithPartitionSpec(&spec), catalog.WithLocation(loc), catalog.WithProperties(tableProps))
	if err != nil {
		return nil, fmt.Errorf("iceberg: create table %s: %w", t.name, t.c.scrub(err))
	}
	t.mu.Lock()
	t.tbl = tbl
	t.mu.Unlock()
	return tbl, nil
}

// tableProps are the properties of a table Spillway creates. Merging
// manifests (Java's default, not iceberg-go's) keeps a table that gets a
// small commit every commit_interval from piling up one manifest per
// commit, which every reader's planning would open. Deleting metadata
// files after commit keeps the last 100 (write.metadata.previous-versions-max)
// instead of every one: each is a copy of the table's metadata, which
// lists every snapshot, so keeping all grows storage with the square of
// the commits (40 MB after 300 commits, TestThousandCommits).
var tableProps = iceberg.Properties{
	table.ManifestMergeEnabledKey:             "true",
	table.MetadataDeleteAfterCommitEnabledKey: "true",
}

// adopt makes a table that holds no snapshot yet take first's field ids,
// as the files carry them (stable ids, see docs/iceberg.md), and the
// partition spec bound to them: CreateTable numbers a new table's fields
// afresh (1..n), but a schema added to a table keeps its ids. It commits
// the schema and the spec before the first snapshot, asserting the schema
// it saw, so that two instances adopting at once conflict and reload. It
// returns the table as it is then.
func (t *Table) adopt(ctx context.Context, tbl *table.Table, files ...File) (*table.Table, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	first := files[0]
	for _, f := range files {
		// As create: the first file whose schema has partition_by's
		// columns (an older value schema may lack one).
		fsc, _, err := fileSchema(fs, f.Location)
		if err != nil {
			break
		}
		if fsc, err = tableSchema(t.c.opts.PartitionBy, fsc); err == nil {
			if _, err = partitionSpec(t.c.opts.PartitionBy, fsc); err == nil {
				first = f
				break
			}
		}
	}
	sc, _, err := fileSchema(fs, first.Location)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w (%w)", t.name, err, ErrRefused)
	}
	if sc, err = tableSchema(t.c.opts.PartitionBy, sc); err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w (%w)", t.name, err, ErrRefused)
	}
	cur := tbl.Schema()
	if sameFields(cur, sc) {
		return tbl, nil
	}
	spec, err := partitionSpec(t.c.opts.PartitionBy, sc)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w (%w)", t.name, err, ErrRefused)
	}
	meta := tbl.Metadata()
	reqs := []table.Requirement{table.AssertTableUUID(meta.TableUUID()), table.AssertCurrentSchemaID(cur.ID)}
	updates := []table.Update{
		table.NewAddSchemaUpdate(sc), table.NewSetCurrentSchemaUpdate(-1),
		table.NewAddPartitionSpecUpdate(&spec, false), table.NewSetDefaultSpecUpdate(-1),
	}
	if _, _, err := t.c.cat.CommitTable(ctx, t.ident, reqs, updates); err != nil {
		return nil, fmt.Errorf("iceberg: %s: give the table the files' field ids: %w (%w)", t.name, t.c.scrub(err), errConflict)
	}
	return t.refresh(ctx)
}

// sameFields reports whether a and b have the same fields with the same
// ids, nested ones included.
func sameFields(a, b *iceberg.Schema) bool {
	ia, err := iceberg.IndexByName(a)
	if err != nil {
		return false
	}
	ib, err := iceberg.IndexByName(b)
	if err != nil {
		return false
	}
	return maps.Equal(ia, ib)
}

// partitionColumn is the Kafka partition's column in a table partitioned
// by it. The files don't hold it: the envelope has no partition column.
// Iceberg's column projection gives a reader of the table an identity
// partition's value from the manifest when the file lacks the column, so
// the table's schema has it (with partitionFieldID) and each file's
// manifest entry its value; see docs/iceberg.md for the readers that
// don't follow that rule.
const partitionColumn = "partition"

// partitionFieldID is partitionColumn's field id: after the envelope's
// fixed ids (1 to 8), below the path-hashed ones (from 1000).
const partitionFieldID = 9

// tableSchema is the schema of a table partitioned by by, for files of
// schema sc: sc, and the partition column when by names it.
func tableSchema(by []string, sc *iceberg.Schema) (*iceberg.Schema, error) {
	need := false
	for _, s := range by {
		if tr, err := parseTransform(s); err == nil && tr.kind == "identity" && tr.column == partitionColumn {
			need = true
		}
	}
	if !need {
		return sc, nil
	}
	if f, ok := sc.FindFieldByName(partitionColumn); ok {
		if f.ID == partitionFieldID && f.Type.Equals(iceberg.PrimitiveTypes.Int32) {
			return sc, nil
		}
		return nil, fmt.Errorf("iceberg.partition_by names partition, the Kafka partition's column, but the data files have a column %q (field id %d) of their own; drop partition from iceberg.partition_by", partitionColumn, f.ID)
	}
	if _, ok := sc.FindFieldByID(partitionFieldID); ok {
		return nil, fmt.Errorf("iceberg.partition_by names partition, whose field id is %d, but the data files use that id already; drop partition from iceberg.partition_by", partitionFieldID)
	}
	fields := append(slices.Clone(sc.Fields()), iceberg.NestedField{ID: partitionFieldID, Name: partitionColumn, Type: iceberg.PrimitiveTypes.Int32, Required: false,
		Doc: "the Kafka partition; the data files don't hold it, their manifest entries do"})
	return iceberg.NewSchemaWithIdentifiers(sc.ID, sc.IdentifierFieldIDs, fields...), nil
}

// partitionSpec builds the spec of partition_by against sc, the table's
// schema (see tableSchema).
func partitionSpec(by []string, sc *iceberg.Schema) (iceberg.PartitionSpec, error) {
	var opts []iceberg.PartitionOption
	for i, s := range by {
		tr, err := parseTransform(s)
		if err != nil {
			return iceberg.PartitionSpec{}, fmt.Errorf("iceberg.partition_by[%d] %q %w", i, s, err)
		}
		if tr.value {
			tr.column = valueColumn(sc, tr.column)
		}
		if _, ok := sc.FindFieldByName(tr.column); !ok {
			var cols []string
			for _, f := range sc.Fields() {
				cols = append(cols, f.Name)
			}
			return iceberg.PartitionSpec{}, fmt.Errorf("iceberg.partition_by[%d] %q names no column of the data files; their columns are %s", i, s, strings.Join(cols, ", "))
		}
		var it iceberg.Transform
		target := tr.column
		switch tr.kind {
		case "identity":
			it = iceberg.IdentityTransform{}
		case "year":
			it, target = iceberg.YearTransform{}, tr.column+"_year"
		case "month":
			it, target = iceberg.MonthTransform{}, tr.column+"_month"
		case "day":
			it, target = iceberg.DayTransform{}, tr.column+"_day"
		case "hour":
			it, target = iceberg.HourTransform{}, tr.column+"_hour"
		case "bucket":
			it, target = iceberg.BucketTransform{NumBuckets: tr.n}, tr.column+"_bucket"
		case "truncate":
			it = iceberg.TruncateTransform{Width: tr.n}
		}
		if tr.value {
			target = tr.name // the folder's name, naming.ValueTransform.FieldName
		}
		opts = append(opts, iceberg.AddPartitionFieldByName(tr.column, target, it, sc, nil))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return iceberg.PartitionSpec{}, fmt.Errorf("iceberg.partition_by: %w", err)
	}
	return spec, nil
}

// evolve checks each file's schema against the table's and, with
// evolve_schema, stages the optional columns the files add in tx. A field
// whose type changes, a required field a file lacks or makes optional, and
// a new required field stop the commit with an error naming the field.
func (t *Table) evolve(ctx context.Context, tbl *table.Table, files []File) (*table.Table, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	ts := tbl.Schema()
	added := map[int]iceberg.NestedField{}
	var addedBy []string
	for _, f := range files {
		fsch, rows, err := fileSchema(fs, f.Location)
		if err != nil {
			return nil, fmt.Errorf("iceberg: %s: %w", t.name, err)
		}
		// The ledger's count is the file's: a mismatch is a file replaced
		// or a ledger entry that names the wrong one.
		if f.Records > 0 && rows != f.Records {
			return nil, fmt.Errorf("iceberg: %s: file %s holds %d records, but its ledger entry says %d", t.name, f.Location, rows, f.Records)
		}
		for _, ff := range fsch.Fields() {
			tf, ok := ts.FindFieldByID(ff.ID)
			if !ok {
				if ff.Required {
					return nil, fmt.Errorf("iceberg: %s: file %s adds the required field %q; a table can only gain optional fields, so make it optional (or give it a default) in the schema", t.name, f.Location, ff.Name)
				}
				if other, ok := ts.FindFieldByName(ff.Name); ok {
					return nil, fmt.Errorf("iceberg: %s: file %s numbers field %q %d, but the table numbers it %d", t.name, f.Location, ff.Name, ff.ID, other.ID)
				}
				if prev, ok := added[ff.ID]; ok && (prev.Name != ff.Name || !prev.Type.Equals(ff.Type)) {
					return nil, fmt.Errorf("iceberg: %s: files add field %d as both %q (%s) and %q (%s)", t.name, ff.ID, prev.Name, prev.Type, ff.Name, ff.Type)
				}
				if _, ok := added[ff.ID]; !ok {
					addedBy = append(addedBy, f.Location)
				}
				added[ff.ID] = ff
				continue
			}
			switch {
			case tf.Name != ff.Name:
				return nil, fmt.Errorf("iceberg: %s: file %s names field %d %q, but the table names it %q", t.name, f.Location, ff.ID, ff.Name, tf.Name)
			case !sameOrFewer(tf.Type, ff.Type):
				return nil, fmt.Errorf("iceberg: %s: field %q changes type from %s in the table to %s in file %s: an incompatible schema change; write to a new table, or change the schema back", t.name, ff.Name, tf.Type, ff.Type, f.Location)
			case tf.Required && !ff.Required:
				return nil, fmt.Errorf("iceberg: %s: field %q is required in the table but optional in file %s: an incompatible schema change", t.name, ff.Name, f.Location)
			}
		}
		for _, tf := range ts.Fields() {
			if _, ok := fsch.FindFieldByID(tf.ID); !ok && tf.Required {
				return nil, fmt.Errorf("iceberg: %s: file %s lacks the required field %q: an incompatible schema change (a required field can't be removed)", t.name, f.Location, tf.Name)
			}
		}
	}
	if len(added) == 0 {
		return tbl, nil
	}
	ids := slices.Sorted(func(yield func(int) bool) {
		for id := range added {
			if !yield(id) {
				return
			}
		}
	})
	var names []string
	for _, id := range ids {
		names = append(names, added[id].Name)
	}
	if !t.c.opts.EvolveSchema {
		return nil, fmt.Errorf("iceberg: %s: file %s adds the fields %s and iceberg.evolve_schema is false; set it to true, or add the columns to the table", t.name, addedBy[0], strings.Join(names, ", "))
	}
	// The table keeps the files' ids: the union of its fields and the new
	// ones, as they are numbered in the files, becomes its schema, in the
	// same catalog commit as the snapshot that adds the files (withSchema).
	fields := slices.Clone(ts.Fields())
	for _, id := range ids {
		ff := added[id]
		ff.Required = false
		fields = append(fields, ff)
	}
	next := iceberg.NewSchema(ts.ID+1, fields...)
	staged, err := t.withSchema(tbl, next)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: add the fields %s: %w", t.name, strings.Join(names, ", "), err)
	}
	return staged, nil
}

// valueColumn is the table column of the value field path: inside the
// envelope's value column (field id 2) when the files have one, else a
// column of the file's root (the value's fields are the file's columns).
func valueColumn(sc *iceberg.Schema, path string) string {
	if f, ok := sc.FindFieldByID(2); ok && f.Name == "value" {
		if _, ok := f.Type.(*iceberg.StructType); ok {
			return "value." + path
		}
	}
	return path
}

// sameOrFewer reports whether a file's column of type file is the table's
// of type tbl, or a struct of it that lacks some of its optional fields
// (at any depth): a value of an older schema version lacks the optional
// field a later one added, and Iceberg reads a field that a file lacks as
// null (docs/iceberg.md, schema evolution). A field the file adds inside a
// struct, or a required one it lacks, is a change of the column's type.
func sameOrFewer(tbl, file iceberg.Type) bool {
	if tbl.Equals(file) {
		return true
	}
	ts, ok1 := tbl.(*iceberg.StructType)
	fs, ok2 := file.(*iceberg.StructType)
	if !ok1 || !ok2 {
		return false
	}
	byID := map[int]iceberg.NestedField{}
	for _, f := range ts.FieldList {
		byID[f.ID] = f
	}
	for _, ff := range fs.FieldList {
		tf, ok := byID[ff.ID]
		if !ok || tf.Name != ff.Name || (tf.Required && !ff.Required) || !sameOrFewer(tf.Type, ff.Type) {
			return false
		}
		delete(byID, ff.ID)
	}
	for _, tf := range byID {
		if tf.Required {
			return false
		}
	}
	return true
}
