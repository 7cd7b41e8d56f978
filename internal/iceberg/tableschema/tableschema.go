// Package tableschema is the schema side of an Iceberg table Spillway
// commits to, without a catalog: the schema a Parquet data file carries
// by its field ids, the table's schema and partition spec for
// iceberg.partition_by, and the merge of a file's schema into the
// table's that schema evolution commits. Package iceberg commits what it
// computes; nothing here loads or commits a table.
package tableschema

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// SameFields reports whether a and b have the same fields with the same
// ids, nested ones included.
func SameFields(a, b *iceberg.Schema) bool {
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

// PartitionColumn is the Kafka partition's column: the envelope's
// partition field, which a table's files always hold (config adds it to
// format.fields), an optional int. Files written before the envelope had
// it lack it; Iceberg's column projection gives a reader of a table
// partitioned by it the value from the manifest for those, so such a
// table's schema has it even when its first files don't (Of).
const PartitionColumn = "partition"

// PartitionFieldID is PartitionColumn's field id: after the envelope's
// fixed ids (1 to 8), below the path-hashed ones (from 1000), as the
// Parquet writer numbers it.
const PartitionFieldID = 9

// ownColumn reports whether ff, a field of a file's root, is the
// envelope's partition column: Spillway's own, which a table gains
// whatever iceberg.evolve_schema says (its files hold it since the
// envelope has it, and tables made before lack it).
func ownColumn(prefix string, ff iceberg.NestedField) bool {
	return prefix == "" && ff.ID == PartitionFieldID && ff.Name == PartitionColumn && ff.Type.Equals(iceberg.PrimitiveTypes.Int32)
}

// Of is the schema of a table partitioned by by, for files of
// schema sc: sc, and the partition column when by names it.
func Of(by []string, sc *iceberg.Schema) (*iceberg.Schema, error) {
	need := false
	for _, s := range by {
		if tr, err := parseTransform(s); err == nil && tr.kind == "identity" && tr.column == PartitionColumn {
			need = true
		}
	}
	if !need {
		return sc, nil
	}
	if f, ok := sc.FindFieldByName(PartitionColumn); ok {
		if f.ID == PartitionFieldID && f.Type.Equals(iceberg.PrimitiveTypes.Int32) {
			return sc, nil
		}
		return nil, fmt.Errorf("iceberg.partition_by names partition, the Kafka partition's column, but the data files have a column %q (field id %d) of their own; drop partition from iceberg.partition_by", PartitionColumn, f.ID)
	}
	if _, ok := sc.FindFieldByID(PartitionFieldID); ok {
		return nil, fmt.Errorf("iceberg.partition_by names partition, whose field id is %d, but the data files use that id already; drop partition from iceberg.partition_by", PartitionFieldID)
	}
	// Files of an envelope without partition (written before it had one,
	// or by format.envelope: false), read through the manifest.
	fields := append(slices.Clone(sc.Fields()), iceberg.NestedField{ID: PartitionFieldID, Name: PartitionColumn, Type: iceberg.PrimitiveTypes.Int32, Required: false,
		Doc: "the Kafka partition"})
	return iceberg.NewSchemaWithIdentifiers(sc.ID, sc.IdentifierFieldIDs, fields...), nil
}

// PartitionSpec builds the spec of partition_by against sc, the table's
// schema (see Of).
func PartitionSpec(by []string, sc *iceberg.Schema) (iceberg.PartitionSpec, error) {
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
