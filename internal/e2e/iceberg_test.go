package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite" // to read the SQL catalog as another engine would

	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

const (
	iceTopic      = "events"
	iceGroup      = "ice"
	icePartitions = 4
	iceRecords    = 40_000
	iceBatch      = 500
)

// TestIcebergCrashExactlyOnce runs `spillway run` with iceberg.table (the
// SQL catalog in SQLite, local storage, envelope Parquet partitioned by
// day) while records flow, and SIGKILLs it twice: once after files are
// stored and in the ledger but before any table commit (a commit_interval
// of an hour), once after the table has snapshots, mid-run. A last run
// drains the topic and stops gracefully. Then the table's current
// snapshot, read by readers nobody here wrote (the catalog's SQLite
// row, the metadata JSON, the manifest list and manifests by
// python3-avro, the data files by DuckDB), holds every produced record
// exactly once, counted by offset per partition.
func TestIcebergCrashExactlyOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts spillway while records are produced; skipped with -short")
	}
	outside.PythonAvro(t) // skips (or fails, with SPILLWAY_TEST_REQUIRE_TOOLS=1) without python3-avro
	duck := outside.NewDuckDB(t)

	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, icePartitions, iceTopic)
	admin := b.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := produceInBackground(ctx, b.Client(t, kgo.ProducerLinger(5*time.Millisecond)),
		iceTopic, icePartitions, iceRecords, iceBatch, 200)

	config := func(interval string) string {
		return fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  start_offset: earliest
  instance_id: ice-0
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  max_records: 1500
  max_age: 1s
  timestamp_source: event
format:
  type: parquet
  compression: zstd
iceberg:
  table: "kafka.{{topic}}"
  partition_by: ["day(timestamp)"]
  commit_interval: %s
admin:
  listen: ""
shutdown:
  timeout: 20s
`, b.Addr, iceGroup, iceTopic, out, interval)
	}
	tableDir := filepath.Join(out, "kafka.db", iceTopic)
	count := func(dir, suffix string) int {
		n := 0
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, suffix) {
				n++
			}
			return nil
		})
		return n
	}
	waitFor := func(sp *spillwayProc, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			select {
			case <-sp.Done():
				t.Fatalf("spillway exited before %s: %s", what, describeExit(sp.Wait(t, 0)))
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 2m", what)
			}
		}
	}

	// ---- kill 1: files stored and in the ledger, no table commit yet.
	sp := startSpillway(t, config("1h"), nil)
	waitFor(sp, "ledger entries", func() bool { return count(filepath.Join(out, "_spillway"), ".json") >= 3 })
	sp.Signal(t, syscall.SIGKILL)
	sp.Wait(t, 30*time.Second)
	if n := count(filepath.Join(tableDir, "metadata"), ".metadata.json"); n != 0 {
		t.Fatalf("the table has %d metadata files before any commit was due: the kill did not land before the commit", n)
	}
	stored := count(filepath.Join(tableDir, "data"), ".parquet")
	t.Logf("kill 1: %d data files stored, no table yet", stored)
	if stored == 0 {
		t.Fatal("no data file stored before kill 1")
	}

	// ---- kill 2: mid-run, after the table has snapshots.
	sp = startSpillway(t, config("1s"), nil)
	waitFor(sp, "table commits", func() bool { return count(filepath.Join(tableDir, "metadata"), ".metadata.json") >= 4 })
	time.Sleep(700 * time.Millisecond) // somewhere between two commits
	sp.Signal(t, syscall.SIGKILL)
	sp.Wait(t, 30*time.Second)
	t.Logf("kill 2: %d metadata files", count(filepath.Join(tableDir, "metadata"), ".metadata.json"))

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	ends := testkit.EndOffsets(t, admin, iceTopic)
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != iceRecords {
		t.Fatalf("end offsets %v add up to %d, want %d", ends, total, iceRecords)
	}

	// ---- the last run drains the topic and stops gracefully, with a
	// last table commit.
	sp = startSpillway(t, config("1s"), nil)
	waitFor(sp, "the topic drained", func() bool {
		_, complete := drainProgress(testkit.CommittedOffsets(t, admin, iceGroup, iceTopic), ends)
		return complete == len(ends)
	})
	sp.WaitRunning(t)
	sp.Signal(t, syscall.SIGTERM)
	if st := sp.Wait(t, 60*time.Second); st.ExitCode() != 0 {
		t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
	}

	files := icebergDataFiles(t, filepath.Join(out, "catalog.db"))
	checkIcebergExactlyOnce(t, duck, files, ends)
	// verify agrees, and takes the table's metadata and catalog for
	// what they are.
	checkVerify(t, config("1s"), ends)
}

// icebergDataFiles follows the Iceberg spec from the SQL catalog's row to
// the current snapshot's data files: the metadata JSON, its manifest
// list and manifests (read by python3-avro). Deleted entries are left out.
func icebergDataFiles(t *testing.T, catalogDB string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", catalogDB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var metaLoc string
	if err := db.QueryRow(`SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'kafka' AND table_name = ?`, iceTopic).Scan(&metaLoc); err != nil {
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
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var list string
	for _, s := range meta.Snapshots {
		if s.ID == meta.Current {
			list = s.ManifestList
		}
	}
	if list == "" {
		t.Fatalf("no current snapshot in %s", metaLoc)
	}
	t.Logf("table: %d snapshots", len(meta.Snapshots))
	var manifests []string
	for _, r := range outside.ReadAvroPython(t, local(list))[0].Records {
		manifests = append(manifests, local(r["manifest_path"].(string)))
	}
	var paths []string
	for _, m := range outside.ReadAvroPython(t, manifests...) {
		for _, e := range m.Records {
			if e["status"].(float64) == 2 { // deleted
				continue
			}
			paths = append(paths, local(e["data_file"].(map[string]any)["file_path"].(string)))
		}
	}
	return paths
}

// checkIcebergExactlyOnce reads files with DuckDB and checks that each
// partition's offsets [0, end) are there exactly once. The envelope has no
// partition column: each file holds one partition, which its name says
// ({{topic}}-{{partition}}-{{start_offset}}).
func checkIcebergExactlyOnce(t *testing.T, duck *outside.DuckDB, files []string, ends map[int32]int64) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("the table's current snapshot holds no data file")
	}
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = outside.SQLString(f)
	}
	rows := duck.Query(t, fmt.Sprintf(`SELECT CAST(regexp_extract(filename, '-([0-9]+)-[0-9]+\.parquet$', 1) AS BIGINT)::DOUBLE AS p,
  count(*)::DOUBLE AS n, count(DISTINCT "offset")::DOUBLE AS d, min("offset")::DOUBLE AS lo, max("offset")::DOUBLE AS hi
FROM read_parquet([%s], filename = true, hive_partitioning = false) GROUP BY p ORDER BY p`, strings.Join(quoted, ",")))
	num := func(v any) float64 {
		f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil {
			t.Fatalf("DuckDB gave %v: %v", v, err)
		}
		return f
	}
	got := map[int32][4]float64{}
	for _, r := range rows[0] {
		got[int32(num(r["p"]))] = [4]float64{num(r["n"]), num(r["d"]), num(r["lo"]), num(r["hi"])}
	}
	var sum float64
	for p, end := range ends {
		g := got[p]
		sum += g[0]
		if want := [4]float64{float64(end), float64(end), 0, float64(end - 1)}; g != want {
			t.Errorf("partition %d in the table: %v records, %v distinct offsets, from %v to %v; want each of [0, %d) once", p, g[0], g[1], g[2], g[3], end)
		}
	}
	if len(got) != len(ends) {
		t.Errorf("the table holds partitions %v, want %d", got, len(ends))
	}
	t.Logf("table: %d data files, %v records", len(files), sum)
}
