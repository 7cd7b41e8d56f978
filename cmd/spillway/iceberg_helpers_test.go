package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// iceTopic is a kfake topic of two partitions that the real runner
// drains into an Iceberg table of a SQLite catalog: the setup the verify
// and table tests of this package share.
type iceTopic struct {
	t         *testing.T
	cluster   *testkit.Cluster
	cl        *kgo.Client
	topic     string
	dir       string // local storage's root, or a scratch dir with other storage
	cfgPath   string
	cfg       *config.Config
	catalogDB string
}

// iceSetup says what differs between the tests.
type iceSetup struct {
	group string
	topic string // "" is events
	// storage is storage's keys in flow style; "" is local storage in dir.
	storage string
	// iceberg is more iceberg keys, in flow style, such as
	// `expire_snapshots: {keep_last: 3}`.
	iceberg string
	// catalogDB is the SQLite file; "" is catalog.db in dir (the default
	// of a local warehouse).
	catalogDB string
}

// newIceTopic starts the cluster and writes the config: records are
// 250 to a file, and the table commits at the graceful stop only
// (commit_interval 1h), so each drain is one snapshot.
func newIceTopic(t *testing.T, s iceSetup) *iceTopic {
	t.Helper()
	if s.topic == "" {
		s.topic = "events"
	}
	it := &iceTopic{t: t, topic: s.topic, dir: t.TempDir()}
	it.cluster = testkit.NewCluster(t, 2, s.topic)
	it.cl = it.cluster.Client(t)
	if s.storage == "" {
		s.storage = fmt.Sprintf(`{url: "file://%s"}`, it.dir)
	}
	ice := `table: "kafka.{{topic}}", commit_interval: 1h`
	it.catalogDB = filepath.Join(it.dir, "catalog.db")
	if s.catalogDB != "" {
		it.catalogDB = s.catalogDB
		ice += fmt.Sprintf(`, catalog: {uri: %q}`, s.catalogDB)
	}
	if s.iceberg != "" {
		ice += ", " + s.iceberg
	}
	yaml := fmt.Sprintf(`kafka: {brokers: [%q], group: %s, topics: [%q]}
storage: %s
file: {max_records: 250, max_age: 1h}
format: {type: parquet}
iceberg: {%s}
admin: {listen: ""}
backpressure: {memory_limit: 128MiB}
`, it.cluster.Addrs()[0], s.group, s.topic, s.storage, ice)
	it.cfgPath = filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(it.cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(it.cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	it.cfg = cfg
	return it
}

// produce produces n records {"i": from+i}, record i to partition i%2.
func (it *iceTopic) produce(from, n int) {
	it.t.Helper()
	testkit.Produce(it.t, it.cl, it.topic, n, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, from+i)}
	})
}

// drain runs the runner until the group's commits reach the topic's end
// offsets, then stops it: the graceful stop commits every stored file
// to the table. A file closes at 250 records, so produce 500 records (250
// a partition) at a time, or files stay open and the group commits
// nothing.
func (it *iceTopic) drain() {
	it.t.Helper()
	drainTopic(it.t, it.cl, it.cfg, it.topic, testkit.EndOffsets(it.t, it.cl, it.topic))
}

// drainTopic runs the runner with cfg until the group's commits on topic
// reach end, then stops it gracefully.
func drainTopic(t *testing.T, cl *kgo.Client, cfg *config.Config, topic string, end map[int32]int64) {
	t.Helper()
	testkit.RunUntilCommitted(t, cl, cfg.Kafka.Group, topic, end, func(ctx context.Context) error {
		return runner.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), runner.Options{})
	})
}

// load opens the table kafka.<name> through iceberg-go's own SQL catalog
// over the same file (not Spillway's code), with the warehouse and
// FileIO properties given. Call done when through with it: it closes
// the catalog's connection, which must not stay open while a test
// rewrites the catalog file.
func (it *iceTopic) load(ctx context.Context, name string, props iceberg.Properties) (tbl *table.Table, done func()) {
	it.t.Helper()
	db, err := sql.Open("sqlite", it.catalogDB)
	if err != nil {
		it.t.Fatal(err)
	}
	if props == nil {
		props = iceberg.Properties{"warehouse": "file://" + it.dir}
	}
	done = func() { _ = db.Close() }
	cat, err := sqlcat.NewCatalog("spillway", db, sqlcat.SQLite, props)
	if err == nil {
		tbl, err = cat.LoadTable(ctx, table.Identifier{"kafka", name})
	}
	if err != nil {
		done()
		it.t.Fatalf("load kafka.%s: %v", name, err)
	}
	return tbl, done
}

// saveCatalog copies the catalog file as it is; restore writes it back,
// setting every table back to the snapshot it had then.
func (it *iceTopic) saveCatalog() (restore func()) {
	it.t.Helper()
	saved, err := os.ReadFile(it.catalogDB)
	if err != nil {
		it.t.Fatal(err)
	}
	return func() {
		it.t.Helper()
		if err := os.WriteFile(it.catalogDB, saved, 0o644); err != nil {
			it.t.Fatal(err)
		}
	}
}

// iceRead is a table as a reader nobody here wrote finds it.
type iceRead struct {
	snapshots int
	// values are the records' values of the current snapshot's data
	// files, as DuckDB reads them, each as often as it is there.
	values map[string]int
	files  []string
}

// readIndependently reads table kafka.<name> of a local warehouse as
// another engine would: the catalog row with the sqlite3 CLI, the
// metadata JSON it names with python3, the manifest list and manifests
// with python3-avro, the data files with DuckDB's read_parquet.
func (it *iceTopic) readIndependently(duck *outside.DuckDB, name string) iceRead {
	t := it.t
	t.Helper()
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skipf("sqlite3 is not installed: %v", err)
	}
	q := fmt.Sprintf(`SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'kafka' AND table_name = '%s'`, name)
	out, err := exec.Command(sqlite, it.catalogDB, q).Output()
	if err != nil {
		t.Fatalf("sqlite3 %s: %v", it.catalogDB, err)
	}
	metaPath := strings.TrimPrefix(strings.TrimSpace(string(out)), "file://")
	if metaPath == "" {
		t.Fatalf("no catalog row for kafka.%s", name)
	}
	py := `import json, sys
m = json.load(open(sys.argv[1]))
cur = [s for s in m.get("snapshots", []) if s["snapshot-id"] == m.get("current-snapshot-id")]
print(json.dumps({"snapshots": len(m.get("snapshots", [])), "list": cur[0]["manifest-list"] if cur else ""}))`
	out, err = exec.Command("python3", "-c", py, metaPath).Output()
	if err != nil {
		t.Fatalf("python3 reading %s: %v", metaPath, err)
	}
	var meta struct {
		Snapshots int    `json:"snapshots"`
		List      string `json:"list"`
	}
	if err := json.Unmarshal(out, &meta); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	r := iceRead{snapshots: meta.Snapshots, values: map[string]int{}}
	if meta.List == "" {
		return r
	}
	local := func(p string) string { return strings.TrimPrefix(p, "file://") }
	var manifests []string
	for _, rec := range outside.ReadAvroPython(t, local(meta.List))[0].Records {
		manifests = append(manifests, local(rec["manifest_path"].(string)))
	}
	var stmts []string
	for _, m := range outside.ReadAvroPython(t, manifests...) {
		for _, e := range m.Records {
			if e["status"].(float64) == 2 { // deleted
				continue
			}
			p := local(e["data_file"].(map[string]any)["file_path"].(string))
			r.files = append(r.files, p)
			stmts = append(stmts, fmt.Sprintf(`SELECT CAST(value AS VARCHAR) AS v FROM read_parquet(%s)`, outside.SQLString(p)))
		}
	}
	for _, rows := range duck.Query(t, stmts...) {
		for _, row := range rows {
			r.values[fmt.Sprint(row["v"])]++
		}
	}
	return r
}

// wantEachOnce fails unless values holds {"i": 0} to {"i": n-1}, once
// each, and nothing else.
func wantEachOnce(t *testing.T, values map[string]int, n int) {
	t.Helper()
	bad := 0
	for i := range n {
		if c := values[fmt.Sprintf(`{"i":%d}`, i)]; c != 1 && bad < 5 {
			t.Errorf(`record {"i":%d} is in the table %d times`, i, c)
			bad++
		}
	}
	if len(values) != n {
		t.Errorf("the table holds %d distinct records, want %d", len(values), n)
	}
}

// containsAny reports whether s contains any of subs.
func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
