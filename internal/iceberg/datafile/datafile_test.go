package datafile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
)

// row is a record as Spillway's Parquet writer lays out the two columns
// the test's spec partitions by, with their Iceberg field ids.
type row struct {
	Partition int32 `parquet:"partition,id(1)"`
	Timestamp int64 `parquet:"timestamp,id(2),timestamp(microsecond:utc)"`
}

// day0 is the records' day, 2026-03-01 UTC: day 20513 since 1970.
var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// partitioned is table metadata partitioned by identity(partition) and
// day(timestamp), at a location in a temporary directory, read through
// iceberg-go's LocalFS.
func partitioned(t *testing.T) Table {
	t.Helper()
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "partition", Type: iceberg.PrimitiveTypes.Int32, Required: true},
		iceberg.NestedField{ID: 2, Name: "timestamp", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true})
	spec, err := iceberg.NewPartitionSpecOpts(
		iceberg.AddPartitionFieldBySourceID(1, "partition", iceberg.IdentityTransform{}, sc, nil),
		iceberg.AddPartitionFieldBySourceID(2, "timestamp_day", iceberg.DayTransform{}, sc, nil))
	if err != nil {
		t.Fatal(err)
	}
	loc := "file://" + t.TempDir()
	meta, err := table.NewMetadata(sc, &spec, table.UnsortedSortOrder, loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs := func(context.Context) (iceio.IO, error) { return iceio.LocalFS{}, nil }
	return Table{IO: iceio.LocalFS{}, Meta: table.New(table.Identifier{"ns", "t"}, meta, loc+"/metadata/v1.json", fs, nil), PartitionColumn: "partition"}
}

// write writes the records of Kafka partition part at the given minutes
// of day0 as a file in the folder dir under tb's location.
func write(t *testing.T, tb Table, dir string, part int32, minutes ...int) File {
	t.Helper()
	rel := fmt.Sprintf("data/%st-%d-%d.parquet", dir, part, minutes[0])
	path := filepath.Join(strings.TrimPrefix(tb.Meta.Location(), "file://"), rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var rows []row
	for _, m := range minutes {
		rows = append(rows, row{Partition: part, Timestamp: day0.Add(time.Duration(m) * time.Minute).UnixMicro()})
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	return File{Location: tb.Meta.Location() + "/" + rel, Partition: part}
}

// TestEntries: a file whose folders say its values gets an entry with
// them and its footer's counts; one whose records or Kafka partition
// contradict its folders is refused, naming the field; one that can't be
// read is an error but no refusal, as trying again may read it.
func TestEntries(t *testing.T) {
	t.Parallel()
	tb := partitioned(t)
	ctx := context.Background()
	good := write(t, tb, "partition=3/timestamp_day=2026-03-01/", 3, 0, 10, 1439)
	dfs, err := Entries(ctx, tb, []File{good})
	if err != nil {
		t.Fatal(err)
	}
	if got := dfs[0].Partition(); dfs[0].Count() != 3 || fmt.Sprint(got[1000], got[1001]) != "3 20513" {
		t.Errorf("entry of %s: %d records, partition %v; want 3, {1000: 3, 1001: 20513}", good.Location, dfs[0].Count(), got)
	}

	for _, tt := range []struct {
		name string
		f    File
		want string
	}{
		{"two days", write(t, tb, "partition=3/timestamp_day=2026-03-01/", 3, 1, 1440), "timestamp_day is 20513 by the file's folder, but its highest timestamp"},
		{"another partition", write(t, tb, "partition=2/timestamp_day=2026-03-01/", 3, 2), "of Kafka partition 3 is in the folder partition=2"},
		{"no folder", write(t, tb, "partition=3/", 3, 3), "is in no timestamp_day=<value> folder"},
	} {
		_, err := Entries(ctx, tb, []File{good, tt.f})
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Entries = %v, want a RefusedError saying %q", tt.name, err, tt.want)
		}
	}

	gone := File{Location: good.Location + ".gone", Partition: 3}
	_, err = Entries(ctx, tb, []File{gone})
	var refused *RefusedError
	if err == nil || errors.As(err, &refused) || !strings.HasPrefix(err.Error(), "read the statistics of "+gone.Location) {
		t.Errorf("Entries of a missing file = %v, want a read error, not a refusal", err)
	}
}
