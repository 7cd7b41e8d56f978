package tables

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	goio "io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/tablepath"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// TestSinkPartitionedTables writes records of two Kafka partitions, with
// keys (null and empty ones among them) and timestamps over two days,
// through the real sink, ledger and commit loop into tables partitioned
// by partition, by bucket(4, key), and by day(timestamp) and bucket(3,
// key), laid out as run lays them out (tablepath.PartitionPath).
// Then readers nobody here wrote check the table: python3-avro reads the
// manifests each file's partition values, DuckDB reads each file's
// records, and every record must be in the partition its manifest entry
// says: its Kafka partition (which the record's value names), its key's
// bucket as iceberg-go computes it (null for the null key), its day.
// DuckDB counts every record once.
func TestSinkPartitionedTables(t *testing.T) {
	t.Parallel()
	duck := outside.NewDuckDB(t)
	outside.PythonAvro(t)
	for _, by := range [][]string{{"partition"}, {"bucket(4,key)"}, {"day(timestamp)", "bucket(3,key)"}} {
		t.Run(strings.Join(by, ","), func(t *testing.T) {
			t.Parallel()
			dir, n := writePartitioned(t, by)
			checkPartitioned(t, duck, dir, by, n)
		})
	}
}

// day1 is the first day of the records.
var day1 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// recordOf is record o of Kafka partition p: its key is null at every
// ninth offset, empty at the next, else one of six; its day alternates
// every three offsets; its value names its partition and offset.
func recordOf(p int32, o int64) *kgo.Record {
	var key []byte
	switch o % 9 {
	case 7:
	case 8:
		key = []byte{}
	default:
		key = []byte(fmt.Sprint("k", (o+int64(p))%6))
	}
	ts := day1.Add(time.Duration(o) * time.Second)
	if o/3%2 == 1 {
		ts = ts.Add(24 * time.Hour)
	}
	return &kgo.Record{Topic: "t", Partition: p, Offset: o, Key: key, Value: []byte(fmt.Sprintf("p%d/o%d", p, o)), Timestamp: ts}
}

// writePartitioned runs the sink and the commit loop over records of two
// partitions into table kafka.t partitioned by by, and returns the
// warehouse and the number of records.
func writePartitioned(t *testing.T, by []string) (string, int) {
	const perPartition = 60
	pq := config.Format{Type: "parquet", Compression: "none", Fields: []string{"key", "value", "offset", "timestamp"}, ValueEncoding: "none", Envelope: true, Micros: true}
	dir, _ := runPartitioned(t, by, perPartition, func(_ *naming.Template, c *sink.Config) {
		c.MaxRecords = 4
		c.NewEncoder = func(w goio.Writer) (format.Encoder, error) { return formats.NewEncoder(pq, w) }
		c.Policy = errpolicy.Policy{Tolerance: "none"}
	}, func(p int32, o int64) *kgo.Record { return recordOf(p, o) })
	return dir, 2 * perPartition
}

// runPartitioned is the harness of the partitioned-table tests: the real
// sink (configured further by configure) and commit loop over perPartition
// records (rec) of partitions 0 and 1 of topic t into table kafka.t
// partitioned by by, in a fresh warehouse; then a next owner's catch-up
// adds from the ledger what the loop had not been handed. It returns the
// warehouse and the sink's stats.
func runPartitioned(t *testing.T, by []string, perPartition int64, configure func(*naming.Template, *sink.Config), rec func(p int32, o int64) *kgo.Record) (string, sink.Stats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bucket, err := storage.Open(ctx, "file://"+dir, storage.Options{PartSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	led := ledger.New(bucket, "")
	pp, err := tablepath.PartitionPath(by)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := naming.Parse(tablepath.Template("kafka.db/t", pp, "{{topic}}-{{partition}}-{{start_offset}}"))
	if err != nil {
		t.Fatal(err)
	}
	io := iceberg.Defaults()
	io.Table = "kafka.{{topic}}"
	io.PartitionBy = by
	openCat := func() Catalog {
		c, err := iceberg.Open(ctx, io, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return icebergCatalog{c: c, writer: "test"}
	}
	opts := Options{Table: "kafka.{{topic}}", Base: "file://" + dir + "/", Interval: time.Hour, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	loop := New(openCat(), led, opts, slog.New(slog.DiscardHandler))
	cfg := sink.Config{
		Template: tmpl, EventTime: true, Extension: ".parquet", MaxOpenFiles: 100,
		NewCompressor: func(w goio.Writer) (goio.WriteCloser, error) { return format.NewCompressor("none", w) },
		ErrRecord:     format.ErrRecord, NullValues: "write",
		Ledger: led, Published: loop.Published,
	}
	configure(tmpl, &cfg)
	s := sink.New(cfg, sink.FromStorage(bucket), budget.New(1<<30, 0), slog.New(slog.DiscardHandler))
	defer s.Close()
	parts := []int32{0, 1}
	for _, p := range parts {
		tp := offsets.TopicPartition{Topic: "t", Partition: p}
		id := ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: p}
		s.Assign(tp, id, ledger.Point{State: offsets.State{Next: 0}})
		loop.Assigned(tp, id)
	}
	for _, p := range parts {
		var recs []*kgo.Record
		for o := int64(0); o < perPartition; o++ {
			recs = append(recs, rec(p, o))
		}
		if err := s.Write(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	if err := loop.Close(ctx); err != nil {
		t.Fatal(err)
	}
	next := New(openCat(), led, opts, slog.New(slog.DiscardHandler))
	for _, p := range parts {
		next.Assigned(offsets.TopicPartition{Topic: "t", Partition: p}, ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: p})
	}
	if err := next.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir, s.Stats()
}

// readTable reads table kafka.t in dir as readers nobody here wrote do:
// its SQLite catalog row, its metadata file, and its manifest list and
// manifests (python3-avro). It returns the default spec's fields
// ("name:transform") and the current snapshot's live data files.
func readTable(t *testing.T, dir string) ([]string, []entry) {
	db, err := sql.Open("sqlite", filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var metaLoc string
	if err := db.QueryRow(`SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'kafka' AND table_name = 't'`).Scan(&metaLoc); err != nil {
		t.Fatalf("iceberg_tables: %v", err)
	}
	local := func(uri string) string { return strings.TrimPrefix(uri, "file://") }
	raw, err := os.ReadFile(local(metaLoc))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Current   int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID           int64  `json:"snapshot-id"`
			ManifestList string `json:"manifest-list"`
		} `json:"snapshots"`
		DefaultSpec int `json:"default-spec-id"`
		Specs       []struct {
			ID     int `json:"spec-id"`
			Fields []struct {
				Name      string `json:"name"`
				Transform string `json:"transform"`
			} `json:"fields"`
		} `json:"partition-specs"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var spec []string
	for _, s := range meta.Specs {
		if s.ID == meta.DefaultSpec {
			for _, f := range s.Fields {
				spec = append(spec, f.Name+":"+f.Transform)
			}
		}
	}
	var list string
	for _, s := range meta.Snapshots {
		if s.ID == meta.Current {
			list = s.ManifestList
		}
	}
	var manifests []string
	for _, r := range outside.ReadAvroPython(t, local(list))[0].Records {
		manifests = append(manifests, local(r["manifest_path"].(string)))
	}
	var entries []entry
	for _, m := range outside.ReadAvroPython(t, manifests...) {
		for _, e := range m.Records {
			if e["status"].(float64) == 2 {
				continue
			}
			df := e["data_file"].(map[string]any)
			entries = append(entries, entry{path: local(df["file_path"].(string)), records: df["record_count"].(float64), partition: df["partition"].(map[string]any)})
		}
	}
	return spec, entries
}

// entry is a data file's manifest entry, as python3-avro reads it.
type entry struct {
	path      string
	records   float64
	partition map[string]any
}

// checkPartitioned reads table kafka.t in dir from its SQLite catalog, its
// metadata file and its manifests (python3-avro), and each data file
// (DuckDB), and checks each record against its file's partition values.
func checkPartitioned(t *testing.T, duck *outside.DuckDB, dir string, by []string, n int) {
	spec, entries := readTable(t, dir)
	wantSpec := map[string]string{"partition": "partition:identity", "bucket(4,key)": "key_bucket:bucket[4]", "day(timestamp)": "timestamp_day:day", "bucket(3,key)": "key_bucket:bucket[3]"}
	for i, b := range by {
		if i >= len(spec) || spec[i] != wantSpec[b] {
			t.Fatalf("the table's spec is %v, want %s at %d", spec, wantSpec[b], i)
		}
	}
	buckets := map[string]int{}
	for _, b := range by {
		var nb int
		if _, err := fmt.Sscanf(b, "bucket(%d,key)", &nb); err == nil {
			buckets["key_bucket"] = nb
		}
	}
	seen := map[string]int{}
	values := map[string]bool{} // distinct partition values, so that the test splits
	total := 0.0
	// One DuckDB session, one statement per file.
	var stmts []string
	for _, e := range entries {
		stmts = append(stmts, fmt.Sprintf(`SELECT key, value, epoch_ms("timestamp") AS ms FROM read_parquet(%s)`, outside.SQLString(e.path)))
	}
	results := duck.Query(t, stmts...)
	for i, e := range entries {
		total += e.records
		rows := results[i]
		if float64(len(rows)) != e.records {
			t.Errorf("%s: the manifest says %v records, DuckDB reads %d", e.path, e.records, len(rows))
		}
		values[fmt.Sprint(e.partition)] = true
		for _, r := range rows {
			value := r["value"].(string)
			seen[value]++
			var p int32
			var o int64
			if _, err := fmt.Sscanf(value, "p%d/o%d", &p, &o); err != nil {
				t.Fatalf("value %q: %v", value, err)
			}
			rec := recordOf(p, o)
			for field, got := range e.partition {
				var want any
				switch field {
				case "partition":
					want = float64(p)
				case "key_bucket":
					if rec.Key != nil {
						want = float64(bucketOf(rec.Key, buckets[field]))
					}
				case "timestamp_day":
					want = rec.Timestamp.UTC().Format(time.DateOnly)
				default:
					t.Fatalf("partition field %s", field)
				}
				if got != want {
					t.Errorf("%s holds record %s (key %q, %s) whose %s is %v, but its manifest entry says %v", e.path, value, rec.Key, rec.Timestamp, field, want, got)
				}
			}
			if ms := fmt.Sprint(r["ms"]); ms != fmt.Sprint(rec.Timestamp.UnixMilli()) {
				t.Errorf("record %s: timestamp %s, want %d", value, ms, rec.Timestamp.UnixMilli())
			}
		}
	}
	if int(total) != n || len(seen) != n {
		t.Errorf("the manifests count %v records and the files hold %d distinct; want %d", total, len(seen), n)
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("record %s is in the table %d times", v, c)
		}
	}
	if len(values) < 2 || (len(by) > 1 && len(values) < 6) {
		t.Errorf("%d distinct partition values: the test must split the records", len(values))
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range values {
			if !yield(k) {
				return
			}
		}
	})
	t.Logf("%d files, partition values %v", len(entries), keys)
}

// bucketOf is iceberg-go's bucket of key among n (the transform the
// table's spec names, applied to the key as a binary value).
func bucketOf(key []byte, n int) int32 {
	b := iceberggo.BucketTransform{NumBuckets: n}.Apply(iceberggo.Optional[iceberggo.Literal]{Valid: true, Val: iceberggo.NewLiteral(key)})
	return int32(b.Val.(iceberggo.Int32Literal))
}
