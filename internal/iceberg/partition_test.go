package iceberg

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/spillway/spillway/internal/iceberg/tableschema"
	"github.com/spillway/spillway/internal/naming"
)

// envRow is a record as Spillway's envelope writer lays it out, with its
// fixed field ids: no partition column.
type envRow struct {
	Key       []byte `parquet:"key,id(1),optional"`
	Value     []byte `parquet:"value,id(2),optional"`
	Offset    int64  `parquet:"offset,id(3)"`
	Timestamp int64  `parquet:"timestamp,id(4),timestamp(microsecond:utc)"`
}

// keyOf is the key of offset o in these tests: every eighth one is null.
func keyOf(o int64) []byte {
	if o%8 == 7 {
		return nil
	}
	return []byte(fmt.Sprint("k", o%5))
}

// envFile writes the records [first, end) of partition part, those whose
// key is in bucket (of n; -1 for the null key) when n > 0, as a file in
// the folder dir under the table's data/, and returns it as the ledger
// would describe it.
func envFile(t testing.TB, loc, dir string, part int32, first, end int64, n, bucket int) File {
	t.Helper()
	var rows []envRow
	for o := first; o < end; o++ {
		k := keyOf(o)
		if n > 0 && bucketOf(k, n) != bucket {
			continue
		}
		rows = append(rows, envRow{Key: k, Value: []byte(fmt.Sprint("v", o)), Offset: o, Timestamp: ts(o)})
	}
	rel := fmt.Sprintf("data/%sevents-%d-%020d.parquet", dir, part, first)
	path := filepath.Join(strings.TrimPrefix(loc, "file://"), rel)
	writeRows(t, path, rows)
	return File{Location: loc + "/" + rel, Topic: "events", Partition: part, First: first, End: end, Seq: first, Records: int64(len(rows))}
}

// bucketOf is iceberg-go's bucket of k among n, -1 for null.
func bucketOf(k []byte, n int) int {
	if k == nil {
		return -1
	}
	b := iceberg.BucketTransform{NumBuckets: n}.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(k)})
	return int(b.Val.(iceberg.Int32Literal))
}

// TestPartitionValues: each file's manifest entry holds the partition
// values its folders say (its Kafka partition, its day, its key's bucket,
// null for the null key), the table has the partition column the files
// lack, and the spec is Iceberg's.
func TestPartitionValues(t *testing.T) {
	t.Parallel()
	o := sqlOptions("kafka.events")
	o.PartitionBy = []string{"partition", "day(timestamp)", "bucket(3, key)"}
	tb := openTable(t, open(t, o, t.TempDir()), "kafka.events")
	loc := tb.Location()
	var files []File
	want := map[string]string{}
	for _, part := range []int32{0, 5} {
		for _, day := range []struct {
			first  int64
			folder string
			days   int
		}{{0, "2026-03-01", 20513}, {1440, "2026-03-02", 20514}} {
			for b := -1; b < 3; b++ {
				bs := fmt.Sprint(b)
				if b < 0 {
					bs = "null"
				}
				f := envFile(t, loc, fmt.Sprintf("partition=%d/timestamp_day=%s/key_bucket=%s/", part, day.folder, bs), part, day.first, day.first+40, 3, b)
				want[f.Location] = fmt.Sprintf("%d/%d/%s", part, day.days, bs)
				files = append(files, f)
			}
		}
	}
	// The ledger's offsets: the files of one partition tile [0, 1480).
	for i := range files {
		files[i].First, files[i].End = int64(i%8)*10, int64(i%8)*10+10
		files[i].Seq = int64(i % 8)
	}
	commit(t, tb, files...)
	spec := tb.tbl.Spec()
	if got := spec.String(); !strings.Contains(got, "partition: identity(9)") || !strings.Contains(got, "timestamp_day: day(4)") || !strings.Contains(got, "key_bucket: bucket[3](1)") {
		t.Errorf("spec = %s", got)
	}
	if f, ok := tb.tbl.Schema().FindFieldByName("partition"); !ok || f.ID != tableschema.PartitionFieldID || f.Required {
		t.Errorf("the table's partition column: %v, %v", f, ok)
	}
	tasks, err := tb.tbl.Scan().PlanFiles(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, task := range tasks {
		p := task.File.Partition()
		got[task.File.FilePath()] = fmt.Sprintf("%v/%v/%v", p[spec.Field(0).FieldID], p[spec.Field(1).FieldID], nullStr(p[spec.Field(2).FieldID]))
	}
	if len(got) != len(want) {
		t.Fatalf("%d files in the table, want %d", len(got), len(want))
	}
	for loc, w := range want {
		if got[loc] != w {
			t.Errorf("%s: partition %s, want %s", loc, got[loc], w)
		}
	}
}

func nullStr(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(v)
}

// A file whose records span two days, or whose folder names another Kafka
// partition or another bucket count, is refused, naming the field, and
// nothing is committed.
func TestPartitionMismatchRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, dir string
		part      int32
		first     int64
		want      string
	}{
		{"two days", "partition=0/timestamp_day=2026-03-01/key_bucket=0/", 0, 1430, "timestamp_day is 20513 by the file's folder, but its highest timestamp"},
		{"another day", "partition=0/timestamp_day=2026-03-02/key_bucket=0/", 0, 0, "timestamp_day is 20514 by the file's folder, but its lowest timestamp"},
		{"another partition", "partition=1/timestamp_day=2026-03-01/key_bucket=0/", 0, 0, "of Kafka partition 0 is in the folder partition=1"},
		{"no such bucket", "partition=0/timestamp_day=2026-03-01/key_bucket=3/", 0, 0, "key_bucket=3 is not a bucket of 3"},
		{"no folder", "partition=0/timestamp_day=2026-03-01/", 0, 0, "is in no key_bucket=<value> folder"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := sqlOptions("kafka.events")
			o.PartitionBy = []string{"partition", "day(timestamp)", "bucket(3, key)"}
			tb := openTable(t, open(t, o, t.TempDir()), "kafka.events")
			err := tb.Commit(testCtx(t), []File{envFile(t, tb.Location(), tt.dir, tt.part, tt.first, tt.first+20, 0, 0)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Commit = %v, want %q", err, tt.want)
			}
			if next, err := tb.Next(testCtx(t), "events"); err != nil || len(next) != 0 {
				t.Fatalf("Next = %v, %v; want nothing committed", next, err)
			}
		})
	}
}

// The files' own column named partition can't be the Kafka partition's.
func TestPartitionColumnTaken(t *testing.T) {
	t.Parallel()
	o := sqlOptions("kafka.events")
	o.PartitionBy = []string{"partition"}
	tb := openTable(t, open(t, o, t.TempDir()), "kafka.events")
	rows := []row{{Partition: 0, Offset: 0, Timestamp: ts(0)}}
	err := tb.Commit(testCtx(t), []File{fileOf(t, tb.Location(), "events", 0, 0, 1, "", rows)})
	if err == nil || !strings.Contains(err.Error(), `the data files have a column "partition" (field id 1) of their own`) {
		t.Fatalf("Commit = %v", err)
	}
}

// TestKeyBucketIsIcebergs: the bucket naming renders a file's folder with
// ({{key_bucket}}, which hashes with the murmur3 package iceberg-go uses)
// is iceberg-go's BucketTransform of the key as a binary and as a string
// value, for keys of every length up to 64 bytes and bucket counts from 1
// to 2^31-1.
func TestKeyBucketIsIcebergs(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 16, 1000, 1<<31 - 1} {
		tmpl, err := naming.Parse(fmt.Sprintf("{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:n=%d}}", n))
		if err != nil {
			t.Fatal(err)
		}
		tr := iceberg.BucketTransform{NumBuckets: n}
		for i := range 2000 {
			key := make([]byte, i%65)
			for j := range key {
				key[j] = byte(i*31 + j*7)
			}
			got, ok := tmpl.Bucket(key)
			asBytes := tr.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(key)})
			asString := tr.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(string(key))})
			if !ok || got != int32(asBytes.Val.(iceberg.Int32Literal)) || got != int32(asString.Val.(iceberg.Int32Literal)) {
				t.Fatalf("bucket(%d) of %x: naming says %d, iceberg-go %v (binary), %v (string)", n, key, got, asBytes.Val, asString.Val)
			}
		}
	}
}
