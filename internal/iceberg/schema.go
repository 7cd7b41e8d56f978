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
	f, err := fs.Open(location) // fs is a literalIO: the file the manifest names
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
	lfs, err := iceio.LoadFS(ctx, t.c.props, loc)
	if err != nil {
		return nil, fmt.Errorf("iceberg: create %s: FileIO for %s: %w", t.name, loc, t.c.scrub(err))
	}
	fs := literalIO{lfs, loc}
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
	tfs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	fs := literalIO{tfs, tbl.Location()}
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

// partitionColumn is the Kafka partition's column: the envelope's
// partition field, which a table's files always hold (config adds it to
// format.fields), an optional int. Files written before the envelope had
// it lack it; Iceberg's column projection gives a reader of a table
// partitioned by it the value from the manifest for those, so such a
// table's schema has it even when its first files don't (tableSchema).
const partitionColumn = "partition"

// partitionFieldID is partitionColumn's field id: after the envelope's
// fixed ids (1 to 8), below the path-hashed ones (from 1000), as the
// Parquet writer numbers it.
const partitionFieldID = 9

// ownColumn reports whether ff, a field of a file's root, is the
// envelope's partition column: Spillway's own, which a table gains
// whatever iceberg.evolve_schema says (its files hold it since the
// envelope has it, and tables made before lack it).
func ownColumn(prefix string, ff iceberg.NestedField) bool {
	return prefix == "" && ff.ID == partitionFieldID && ff.Name == partitionColumn && ff.Type.Equals(iceberg.PrimitiveTypes.Int32)
}

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
	// Files of an envelope without partition (written before it had one,
	// or by format.envelope: false), read through the manifest.
	fields := append(slices.Clone(sc.Fields()), iceberg.NestedField{ID: partitionFieldID, Name: partitionColumn, Type: iceberg.PrimitiveTypes.Int32, Required: false,
		Doc: "the Kafka partition"})
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
			target = tr.name // the folder's name, partvalue.ValueTransform.FieldName
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
// evolve_schema, stages the optional fields the files add in tx: columns,
// and fields inside a struct column at any depth (a struct, a list's
// element struct, a map's value struct), such as a field a registry
// schema adds to the envelope's value. A field whose type changes, a
// required field a file lacks or makes optional, a new required field and
// a new field whose id the table gives another field stop the commit with
// an error naming the field's path (value.user.email).
func (t *Table) evolve(ctx context.Context, tbl *table.Table, files []File) (*table.Table, error) {
	tfs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	fs := literalIO{tfs, tbl.Location()}
	ts := tbl.Schema()
	m := &merger{table: t.name, ids: map[int]string{}, current: map[int]string{}}
	// Every id any of the table's schemas gave a field, with its path: a
	// new field may not take one of them for another path, or Iceberg
	// would read the other field's column as the new one (or back).
	for _, sc := range tbl.Metadata().Schemas() {
		walkIDs("", sc.Fields(), func(id int, path string) {
			if _, ok := m.ids[id]; !ok || sc.ID == ts.ID {
				m.ids[id] = path
			}
		})
	}
	walkIDs("", ts.Fields(), func(id int, path string) { m.current[id] = path })
	fields := ts.Fields()
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
		m.file = f.Location
		if fields, err = m.fields("", fields, fsch.Fields()); err != nil {
			return nil, err
		}
	}
	if len(m.added) == 0 && !m.own {
		return tbl, nil
	}
	names := strings.Join(m.added, ", ")
	if len(m.added) > 0 && !t.c.opts.EvolveSchema {
		return nil, fmt.Errorf("iceberg: %s: file %s adds the fields %s and iceberg.evolve_schema is false; set it to true, or add the columns to the table", t.name, m.addedBy, names)
	}
	// The table keeps the files' ids: the union of its fields and the new
	// ones, as they are numbered in the files, becomes its schema, in the
	// same catalog commit as the snapshot that adds the files (withSchema).
	next := iceberg.NewSchemaWithIdentifiers(ts.ID+1, ts.IdentifierFieldIDs, fields...)
	staged, err := t.withSchema(tbl, next)
	if err != nil {
		if m.own {
			names = strings.Join(append(m.added, partitionColumn), ", ")
		}
		return nil, fmt.Errorf("iceberg: %s: add the fields %s: %w", t.name, names, err)
	}
	return staged, nil
}

// merger merges files' schemas into a table's: the union of their fields,
// a file's new fields (optional ones only) taken as the file numbers them.
type merger struct {
	table   string
	file    string         // the file being merged, for errors
	ids     map[int]string // the ids the table and the merged fields use, by path
	added   []string       // the paths of the fields the files add
	addedBy string         // the first file that adds one
	// current are the ids of the table's current schema, by path; own is
	// set when the files add the partition column (ownColumn), which is
	// not in added.
	current map[int]string
	own     bool
}

// fields merges the fields of a file's struct (the root, with prefix "")
// into the table's, and returns the merged fields: the table's, in its
// order, each merged with the file's of its id, then the file's new ones.
// A field the file lacks stays (Iceberg reads it null), unless required.
func (m *merger) fields(prefix string, tfs, ffs []iceberg.NestedField) ([]iceberg.NestedField, error) {
	out := slices.Clone(tfs)
	at := map[int]int{}
	for i, tf := range tfs {
		at[tf.ID] = i
	}
	seen := map[int]bool{}
	for _, ff := range ffs {
		path := prefix + ff.Name
		i, ok := at[ff.ID]
		if !ok {
			if err := m.add(prefix, tfs, ff); err != nil {
				return nil, err
			}
			ff.Required = false
			out = append(out, ff)
			continue
		}
		seen[ff.ID] = true
		tf := tfs[i]
		if tf.Name != ff.Name {
			return nil, fmt.Errorf("iceberg: %s: file %s names field %d %q, but the table names it %q", m.table, m.file, ff.ID, path, prefix+tf.Name)
		}
		typ, err := m.typ(path, tf.Type, ff.Type)
		if err != nil {
			return nil, err
		}
		if tf.Required && !ff.Required {
			return nil, fmt.Errorf("iceberg: %s: field %q is required in the table but optional in file %s: an incompatible schema change", m.table, path, m.file)
		}
		out[i].Type = typ
	}
	for _, tf := range tfs {
		if !seen[tf.ID] && tf.Required {
			return nil, fmt.Errorf("iceberg: %s: file %s lacks the required field %q: an incompatible schema change (a required field can't be removed)", m.table, m.file, prefix+tf.Name)
		}
	}
	return out, nil
}

// add checks a field the file adds to the table's struct tfs (at prefix)
// and records it and the ids it brings.
func (m *merger) add(prefix string, tfs []iceberg.NestedField, ff iceberg.NestedField) error {
	path := prefix + ff.Name
	if ff.Required {
		return fmt.Errorf("iceberg: %s: file %s adds the required field %q; a table can only gain optional fields, so make it optional (or give it a default) in the schema", m.table, m.file, path)
	}
	for _, tf := range tfs {
		if tf.Name == ff.Name {
			return fmt.Errorf("iceberg: %s: file %s numbers field %q %d, but the table numbers it %d", m.table, m.file, path, ff.ID, tf.ID)
		}
	}
	if ownColumn(prefix, ff) {
		// Only the current schema can hold id 9 for a column of a file:
		// an older schema that gives it another path is the one a
		// catalog numbered afresh (1, 2, ...) when the table was made,
		// before adopt gave it the files' ids, and no file was written
		// with it.
		if other, ok := m.current[ff.ID]; ok {
			return fmt.Errorf("iceberg: %s: file %s adds the Kafka partition's column %q with id %d, which the table gives %q; write to a new table", m.table, m.file, path, ff.ID, other)
		}
		m.current[ff.ID], m.ids[ff.ID] = path, path
		m.own = true
		return nil
	}
	var err error
	walkIDs(prefix, []iceberg.NestedField{ff}, func(id int, p string) {
		if other, ok := m.ids[id]; ok && err == nil {
			err = fmt.Errorf("iceberg: %s: file %s adds the field %q with id %d, which the table gives %q: two paths whose ids collide; rename the new field", m.table, m.file, p, id, other)
		}
	})
	if err != nil {
		return err
	}
	walkIDs(prefix, []iceberg.NestedField{ff}, func(id int, p string) { m.ids[id] = p })
	if len(m.added) == 0 {
		m.addedBy = m.file
	}
	m.added = append(m.added, path)
	return nil
}

// typ merges the type of a file's field at path into the table's: the
// same type, or a struct (a list's element struct, a map's value struct)
// whose fields merge. Anything else is a change of the field's type.
func (m *merger) typ(path string, tt, ft iceberg.Type) (iceberg.Type, error) {
	if tt.Equals(ft) {
		return tt, nil
	}
	changes := func() error {
		return fmt.Errorf("iceberg: %s: field %q changes type from %s in the table to %s in file %s: an incompatible schema change; write to a new table, or change the schema back", m.table, path, tt, ft, m.file)
	}
	switch tt := tt.(type) {
	case *iceberg.StructType:
		ft, ok := ft.(*iceberg.StructType)
		if !ok {
			return nil, changes()
		}
		fields, err := m.fields(path+".", tt.FieldList, ft.FieldList)
		if err != nil {
			return nil, err
		}
		return &iceberg.StructType{FieldList: fields}, nil
	case *iceberg.ListType:
		ft, ok := ft.(*iceberg.ListType)
		if !ok || ft.ElementID != tt.ElementID || (tt.ElementRequired && !ft.ElementRequired) {
			return nil, changes()
		}
		elem, err := m.typ(path+".element", tt.Element, ft.Element)
		if err != nil {
			return nil, err
		}
		return &iceberg.ListType{ElementID: tt.ElementID, Element: elem, ElementRequired: tt.ElementRequired}, nil
	case *iceberg.MapType:
		ft, ok := ft.(*iceberg.MapType)
		if !ok || ft.KeyID != tt.KeyID || !ft.KeyType.Equals(tt.KeyType) || ft.ValueID != tt.ValueID || (tt.ValueRequired && !ft.ValueRequired) {
			return nil, changes()
		}
		val, err := m.typ(path+".value", tt.ValueType, ft.ValueType)
		if err != nil {
			return nil, err
		}
		return &iceberg.MapType{KeyID: tt.KeyID, KeyType: tt.KeyType, ValueID: tt.ValueID, ValueType: val, ValueRequired: tt.ValueRequired}, nil
	}
	return nil, changes()
}

// walkIDs calls fn with the id and path of each field in fields (at
// prefix) and in their types, a list's element and a map's key and value
// included.
func walkIDs(prefix string, fields []iceberg.NestedField, fn func(id int, path string)) {
	for _, f := range fields {
		fn(f.ID, prefix+f.Name)
		walkType(prefix+f.Name, f.Type, fn)
	}
}

func walkType(path string, t iceberg.Type, fn func(id int, path string)) {
	switch t := t.(type) {
	case *iceberg.StructType:
		walkIDs(path+".", t.FieldList, fn)
	case *iceberg.ListType:
		fn(t.ElementID, path+".element")
		walkType(path+".element", t.Element, fn)
	case *iceberg.MapType:
		fn(t.KeyID, path+".key")
		walkType(path+".key", t.KeyType, fn)
		fn(t.ValueID, path+".value")
		walkType(path+".value", t.ValueType, fn)
	}
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
