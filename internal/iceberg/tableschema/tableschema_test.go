package tableschema

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

// envelope is the root of an envelope file with a registry-typed value
// and without the partition column, as files written before it had one.
func envelope(extra ...iceberg.NestedField) *iceberg.Schema {
	fields := []iceberg.NestedField{
		opt(1, "key", iceberg.PrimitiveTypes.Binary),
		opt(2, "value", st(opt(1001, "country", iceberg.PrimitiveTypes.String))),
		req(4, "timestamp", iceberg.PrimitiveTypes.TimestampTz),
	}
	return iceberg.NewSchema(0, append(fields, extra...)...)
}

// A table partitioned by partition gets the column, optional and with
// its fixed id, even when its files lack it; a file column of that name
// or id that is not Spillway's is refused. A value field's transform is
// of the column inside value, named as the folder names it.
func TestOfAndPartitionSpec(t *testing.T) {
	t.Parallel()
	sc, err := Of([]string{"partition", "country"}, envelope())
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := sc.FindFieldByName(PartitionColumn); !ok || f.ID != PartitionFieldID || f.Required {
		t.Errorf("table schema %s: want an optional %s with id %d", sc, PartitionColumn, PartitionFieldID)
	}
	if plain, err := Of([]string{"day(timestamp)"}, envelope()); err != nil || plain.NumFields() != 3 {
		t.Errorf("a table not partitioned by partition: %v, %v; want the files' schema", plain, err)
	}
	spec, err := PartitionSpec([]string{"partition", "country"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range spec.Fields() {
		got = append(got, f.Name+"="+f.Transform.String())
	}
	if want := "partition=identity,country=identity"; strings.Join(got, ",") != want {
		t.Errorf("spec %s; want %s", strings.Join(got, ","), want)
	}

	for _, c := range []struct {
		name string
		sc   *iceberg.Schema
		want string
	}{
		{"a column named partition", envelope(opt(50, "partition", iceberg.PrimitiveTypes.Int32)), `have a column "partition" (field id 50) of their own`},
		{"id 9 taken", envelope(opt(9, "region", iceberg.PrimitiveTypes.String)), "whose field id is 9, but the data files use that id already"},
	} {
		if _, err := Of([]string{"partition"}, c.sc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %s", c.name, err, c.want)
		}
	}
	if _, err := PartitionSpec([]string{"bucket(16, key)", "day(created_at)"}, envelope()); err == nil || !strings.Contains(err.Error(), `iceberg.partition_by[1] "day(created_at)" names no column of the data files`) {
		t.Errorf("a missing column: %v", err)
	}
}

func TestCheckTransform(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"partition", "day(timestamp)", "bucket(16, key)", "country", "truncate(4, name)"} {
		if err := CheckTransform(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for s, want := range map[string]string{
		"days(timestamp":   "is not a transform",
		"bucket(key)":      "bucket needs the number of buckets",
		"truncate(4, key)": "truncates key, which is the record's own",
	} {
		if err := CheckTransform(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error containing %s", s, err, want)
		}
	}
}
