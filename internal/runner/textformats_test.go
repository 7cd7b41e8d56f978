package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// textRun produces records with franz-go (keys, headers, tombstones) and
// with kcat (gzip, zstd, lz4 and snappy batches, keys and headers), drains
// them with cfg's format, then loses the group's commit (as a crash between
// upload and commit does), produces more and drains again. It returns the
// output directory and the end offsets. Every value is unique per
// partition and names its origin: "id-<i>" or "kcat-<partition>-<n>".
func textRun(t *testing.T, format, compression string) (dir string, end map[int32]int64) {
	t.Helper()
	cluster := testkit.NewCluster(t, 4, "events")
	cl := cluster.Client(t)
	produced := 0
	produce := func(n int) {
		base := produced
		produced += n
		testkit.Produce(t, cl, "events", n, func(j int) *kgo.Record {
			i := base + j
			r := &kgo.Record{Partition: int32(i % 4), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "id-%d", i)}
			switch i % 10 {
			case 3:
				r.Value = nil // a tombstone
			case 7:
				r.Headers = []kgo.RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)}}
			}
			return r
		})
	}
	produce(6_000)
	for p, codec := range []string{"gzip", "zstd", "lz4", "snappy"} {
		var lines []string
		for n := range 250 {
			lines = append(lines, fmt.Sprintf("kkey-%d\tkcat-%d-%d", n, p, n))
		}
		outside.KcatProduce(t, cluster.Addrs(), "events", int32(p), codec, lines, true)
	}
	end = testkit.EndOffsets(t, cl, "events")

	dir = t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Format.Type = format
	cfg.Format.Compression = compression
	cfg.File.MaxRecords = 700
	_, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}

	zero := kadm.Offsets{}
	for p := range end {
		zero.AddOffset("events", p, 0, -1)
	}
	if _, err := kadm.NewClient(cl).CommitOffsets(context.Background(), cfg.Kafka.Group, zero); err != nil {
		t.Fatal(err)
	}
	produce(2_000)
	end = testkit.EndOffsets(t, cl, "events")
	_, stop2 := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	if err := stop2(); err != nil {
		t.Fatalf("second graceful stop: %v", err)
	}
	return dir, end
}

// outputFiles lists the data files under dir, with their topic and
// partition from the default name template.
func outputFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	if err := testkit.WalkOutput(dir, func(path string) error {
		if _, _, _, ok := testkit.ParseDefaultName(path); !ok {
			return fmt.Errorf("%s: not a {{topic}}-{{partition}}-{{start_offset}} name", path)
		}
		files = append(files, path)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no files under %s", dir)
	}
	return files
}

// TestEndToEndCSV: the csv format through the whole pipeline, read back by
// DuckDB: every offset (from the offset column) stored exactly once, and
// keys, values and headers as Aiven writes them.
func TestEndToEndCSV(t *testing.T) {
	t.Parallel()
	duck := outside.NewDuckDB(t)
	dir, end := textRun(t, "csv", "zstd")
	files := outputFiles(t, dir)
	list := make([]string, len(files))
	for i, f := range files {
		if !strings.HasSuffix(f, ".csv.zst") {
			t.Fatalf("file %s, want the extension .csv.zst", f)
		}
		list[i] = outside.SQLString(f)
	}
	rows := duck.Query(t, fmt.Sprintf(`SELECT * FROM read_csv([%s], filename=true, header=false, auto_detect=false,
		delim=',', quote='"', escape='"', new_line='\n', allow_quoted_nulls=false,
		columns={'key': 'VARCHAR', 'value': 'VARCHAR', 'offset': 'BIGINT', 'timestamp': 'BIGINT', 'headers': 'VARCHAR'})`,
		strings.Join(list, ", ")))[0]

	var recs []testkit.StoredRecord
	var kcat, tombstones, traced int
	for _, row := range rows {
		file, _ := row["filename"].(string)
		topic, partition, _, _ := testkit.ParseDefaultName(file)
		off, err := strconv.ParseInt(fmt.Sprint(row["offset"]), 10, 64)
		if err != nil {
			t.Fatalf("row %v: offset: %v", row, err)
		}
		recs = append(recs, testkit.StoredRecord{File: file, Topic: topic, Partition: partition, Offset: off})
		value, _ := row["value"].(string)
		key := decodeB64(t, row["key"])
		headers, _ := row["headers"].(string)
		switch {
		case strings.HasPrefix(value, "kcat-"):
			kcat++
			var n int
			if _, err := fmt.Sscanf(value, "kcat-%d-%d", new(int), &n); err != nil || key != fmt.Sprintf("kkey-%d", n) {
				t.Fatalf("kcat row %v: key %q", row, key)
			}
			want := b64s("h1") + ":" + b64s("v1") + ";" + b64s("trace") + ":" + b64s("abc") + ";"
			if headers != want {
				t.Fatalf("kcat row %v: headers %q, want %q", row, headers, want)
			}
		case row["value"] == nil:
			tombstones++
		case strings.HasPrefix(value, "id-"):
			i, err := strconv.Atoi(strings.TrimPrefix(value, "id-"))
			if err != nil || key != fmt.Sprintf("k%d", i) {
				t.Fatalf("row %v: key %q for value %q", row, key, value)
			}
			if i%10 == 7 {
				traced++
				if want := b64s("trace") + ":" + b64s(fmt.Sprintf("t%d", i)) + ";"; headers != want {
					t.Fatalf("row %v: headers %q, want %q", row, headers, want)
				}
			} else if row["headers"] != nil {
				t.Fatalf("row %v: headers %q, want none", row, headers)
			}
		default:
			t.Fatalf("unexpected row %v", row)
		}
	}
	testkit.AssertExactlyOnce(t, recs, "events", end)
	if kcat != 1000 || tombstones != 800 || traced != 800 {
		t.Errorf("read %d kcat records, %d tombstones, %d records with a trace header; want 1000, 800, 800", kcat, tombstones, traced)
	}
}

func b64s(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func decodeB64(t *testing.T, v any) string {
	t.Helper()
	s, _ := v.(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("key %q is not base64: %v", s, err)
	}
	return string(b)
}

// TestEndToEndBytes: the bytes format through the whole pipeline, files
// decompressed by gzip -dc: each value is on its own line, tombstones are
// empty lines, and every record is stored exactly once, by the id each
// value carries and by its offset (the file's start offset plus its line).
func TestEndToEndBytes(t *testing.T) {
	t.Parallel()
	dir, end := textRun(t, "bytes", "gzip")
	var recs []testkit.StoredRecord
	ids := map[string]int{}
	tombstones := 0
	for _, f := range outputFiles(t, dir) {
		if !strings.HasSuffix(f, ".bin.gz") {
			t.Fatalf("file %s, want the extension .bin.gz", f)
		}
		topic, partition, start, _ := testkit.ParseDefaultName(f)
		body := outside.Decompress(t, f)
		if !bytes.HasSuffix(body, []byte("\n")) {
			t.Fatalf("%s does not end in the separator", f)
		}
		for i, v := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
			recs = append(recs, testkit.StoredRecord{File: f, Line: i + 1, Topic: topic, Partition: partition, Offset: start + int64(i)})
			switch {
			case v == "":
				tombstones++
			case strings.HasPrefix(v, "id-"):
				n, err := strconv.Atoi(strings.TrimPrefix(v, "id-"))
				if err != nil || int32(n%4) != partition {
					t.Fatalf("%s line %d: %q in partition %d", f, i+1, v, partition)
				}
				ids[v]++
			case strings.HasPrefix(v, "kcat-"+strconv.Itoa(int(partition))+"-"):
				ids[v]++
			default:
				t.Fatalf("%s line %d: unexpected value %q", f, i+1, v)
			}
		}
	}
	testkit.AssertExactlyOnce(t, recs, "events", end)
	for id, n := range ids {
		if n != 1 {
			t.Errorf("value %s stored %d times", id, n)
		}
	}
	if len(ids) != 8_000-800+1000 || tombstones != 800 {
		t.Errorf("read %d distinct values and %d tombstones, want %d and 800", len(ids), tombstones, 8_000-800+1000)
	}
}
