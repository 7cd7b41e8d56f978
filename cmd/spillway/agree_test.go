package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// agreeYAML is the config the agreement cases vary: each %NAME% is replaced
// by the case's value or the default in agreeDefaults.
const agreeYAML = `kafka:
  brokers: ["%BROKER%"]
  topics: %TOPICS%
  group: %GROUP%
%KAFKA_EXTRA%storage:
  url: '%URL%'
  prefix: '%PREFIX%'
format:
  type: %FORMAT%
admin:
  listen: "%ADMIN%"
backpressure:
  memory_limit: %MEMORY%
%EXTRA%`

// TestCheckAndRunAgree feeds each config to `config check` and to `run`,
// both in-process through the real command functions, and asserts that they
// agree: both refuse it with exit 2 and the same message naming the key, or
// both accept it (run starts consuming, and stops cleanly when cancelled as
// by SIGTERM).
func TestCheckAndRunAgree(t *testing.T) {
	keepGoMemLimit(t)
	cluster := testkit.NewCluster(t, 2, "events", "_spillway")
	cases := []struct {
		name string
		set  map[string]string // placeholders of agreeYAML; OUT is a fresh directory
		want string            // "" when accepted; else in both messages
	}{
		// Accepted.
		{name: "absolute file URL"},
		{name: "file URL with localhost", set: map[string]string{"URL": "file://localhost%OUT%"}},
		{name: "file URL with one slash", set: map[string]string{"URL": "file:%OUT%"}},
		{name: "prefix that is a folder", set: map[string]string{"PREFIX": "raw/2024/"}},
		{name: "prefix that starts names", set: map[string]string{"PREFIX": "raw-"}},
		{name: "prefix with a name that starts with two dots", set: map[string]string{"PREFIX": "..data/"}},
		{name: "format json", set: map[string]string{"FORMAT": "json"}},
		{name: "format in capitals", set: map[string]string{"FORMAT": "JSONL"}},
		{name: "format csv", set: map[string]string{"FORMAT": "csv"}},
		{name: "format bytes", set: map[string]string{"FORMAT": "bytes"}},
		{name: "format avro", set: map[string]string{"FORMAT": "avro"}},
		{name: "format parquet", set: map[string]string{"FORMAT": "Parquet"}},
		{name: "spool", set: map[string]string{"FORMAT": "parquet", "MEMORY": "256MiB\n  spool_dir: %OUT%/spool\n  disk_limit: 1GiB"}},
		// The registry is asked only for the schemas of records.
		{name: "schema registry", set: map[string]string{"FORMAT": "avro", "EXTRA": "schema_registry:\n  url: http://127.0.0.1:1\n  decode: BOTH\n"}},

		// A topic named like the ledger's folder, in names of its own.
		{name: "topic named _spillway", set: map[string]string{"TOPICS": "[_spillway]"}},

		// Refused by both, naming the key.
		{name: "format unknown", set: map[string]string{"FORMAT": "xml"}, want: `format.type: "xml" is not valid`},
		{name: "file URL with a host", set: map[string]string{"URL": "file://relative%OUT%"}, want: `storage.url: "file://relative/`},
		{name: "prefix that escapes", set: map[string]string{"PREFIX": "../escape/"}, want: `storage.prefix: "../escape/" has a ".." segment`},
		{name: "prefix that climbs back", set: map[string]string{"PREFIX": "raw/../raw/"}, want: `storage.prefix: "raw/../raw/" has a ".." segment`},
		{name: "absolute prefix", set: map[string]string{"PREFIX": "/abs/"}, want: `storage.prefix: "/abs/" starts with "/"`},
		{name: "prefix with an empty segment", set: map[string]string{"PREFIX": "a//b/"}, want: `storage.prefix: "a//b/" has an empty path segment`},
		{name: "prefix with a dot segment", set: map[string]string{"PREFIX": "./raw/"}, want: `storage.prefix: "./raw/" has a "." segment`},
		{name: "duplicate top-level key", set: map[string]string{"EXTRA": "kafka:\n  group: other\n"}, want: "kafka is set twice (first at line 1)"},
		{name: "duplicate nested key", set: map[string]string{"KAFKA_EXTRA": "  topics: [other]\n"}, want: ":5: kafka.topics is set twice (first at line 3)"},
		{name: "unknown key", set: map[string]string{"EXTRA": "file:\n  max_recrods: 10\n"}, want: "file.max_recrods: unknown key; did you mean file.max_records?"},
		{name: "memory limit too small", set: map[string]string{"MEMORY": "32MiB"}, want: `backpressure.memory_limit: "32MiB" is too small`},
		{name: "spool dir under a file", set: map[string]string{"MEMORY": "256MiB\n  spool_dir: /etc/hostname/spool"}, want: `backpressure.spool_dir: "/etc/hostname/spool" can't be created: /etc/hostname is not a directory`},
		{name: "disk limit too small", set: map[string]string{"MEMORY": "256MiB\n  spool_dir: %OUT%/spool\n  disk_limit: 1MiB"}, want: `backpressure.disk_limit: "1MiB" is too small`},
		{name: "bad admin listen", set: map[string]string{"ADMIN": "localhost"}, want: `admin.listen: "localhost" is not host:port`},
		{name: "admin listen with a signed port", set: map[string]string{"ADMIN": "127.0.0.1:+0"}, want: `admin.listen: "127.0.0.1:+0" has an invalid port "+0"`},
		{name: "schema registry URL without scheme", set: map[string]string{"EXTRA": "schema_registry:\n  url: registry:8081\n"}, want: `schema_registry.url: "registry:8081" must start with http:// or https://`},
		{name: "schema registry decode typo", set: map[string]string{"EXTRA": "schema_registry:\n  url: http://127.0.0.1:1\n  decode: values\n"}, want: `schema_registry.decode: "values" is not valid; use value, key or both`},
		{name: "topic whose files go into the ledger's folder", set: map[string]string{"TOPICS": "[events, _spillway]", "PREFIX": "raw-",
			"EXTRA": "file:\n  name_template: '{{topic}}/{{partition}}-{{start_offset}}'\n"},
			want: `kafka.topics: "_spillway" is a topic whose files file.name_template "{{topic}}/{{partition}}-{{start_offset}}" would write into "_spillway/" under storage.prefix, the folder of Spillway's resume ledger; start the template with a folder of your own, such as file.name_template: "topics/{{topic}}/{{partition}}-{{start_offset}}"`},
		{name: "template in the ledger's folder", set: map[string]string{"EXTRA": "file:\n  name_template: '_spillway/{{topic}}-{{partition}}-{{start_offset}}'\n"},
			want: `file.name_template: "_spillway/{{topic}}-{{partition}}-{{start_offset}}" writes files into "_spillway/" under storage.prefix`},
		{name: "iceberg table of jsonl files", set: map[string]string{"EXTRA": "iceberg:\n  table: kafka.events\n"},
			want: `format.type: "jsonl" must be parquet when iceberg.table is set`},
		{name: "iceberg table outside storage", set: map[string]string{"FORMAT": "parquet", "EXTRA": "iceberg:\n  table: kafka.events\n  catalog:\n    warehouse: 's3://lake/wh'\n"},
			want: `iceberg.catalog.warehouse: "s3://lake/wh" puts the table outside where Spillway writes`},
		{name: "iceberg day partitions on the wall clock", set: map[string]string{"FORMAT": "parquet", "EXTRA": "iceberg:\n  table: kafka.events\n  partition_by: ['day(timestamp)']\n"},
			want: `file.timestamp_source: "wallclock" must be event when iceberg.partition_by uses the timestamp`},
		{name: "iceberg glue with a bad region", set: map[string]string{"FORMAT": "parquet", "EXTRA": "iceberg:\n  table: kafka.events\n  catalog:\n    type: glue\n    region: EU_WEST\n"},
			want: `iceberg.catalog.region: "EU_WEST" is not an AWS region; give one such as us-east-1 or eu-west-1`},
		{name: "iceberg glue with a nested namespace", set: map[string]string{"FORMAT": "parquet", "EXTRA": "iceberg:\n  table: lake.kafka.events\n  catalog:\n    type: glue\n    region: eu-west-1\n"},
			want: `iceberg.table: "lake.kafka.events" has a namespace of 2 levels, and a Glue catalog's namespace is one database`},
		{name: "iceberg token for the sql catalog", set: map[string]string{"FORMAT": "parquet", "EXTRA": "iceberg:\n  table: kafka.events\n  catalog:\n    token: s3cr3t-token\n"},
			want: `iceberg.catalog.token: is set but iceberg.catalog.type is sql`},
		{name: "iceberg bucket of a registry-typed key", set: map[string]string{"FORMAT": "parquet", "EXTRA": "schema_registry:\n  url: http://127.0.0.1:1\n  decode: both\niceberg:\n  table: kafka.events\n  partition_by: ['bucket(4, key)']\n"},
			want: `iceberg.partition_by: "bucket(4,key)" buckets the key, but schema_registry.decode both types the key column`},
		{name: "iceberg partition by a value field without the registry", set: map[string]string{"FORMAT": "parquet", "EXTRA": "iceberg:\n  table: kafka.events\n  partition_by: ['day(created_at)']\n"},
			want: `iceberg.partition_by: "day(created_at)" partitions by the value field created_at, which Spillway reads only from values the schema registry types; set schema_registry.url`},
		{name: "iceberg partition and key bucket", set: map[string]string{"FORMAT": "parquet", "EXTRA": "iceberg:\n  table: kafka.events\n  partition_by: [partition, 'bucket(4, key)']\n"}},
		{name: "topic regex that does not compile", set: map[string]string{"KAFKA_EXTRA": "  topic_regex: '('\n"}, want: `kafka.topic_regex: "(" is not a valid regular expression`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			vals := map[string]string{
				"BROKER": cluster.Addrs()[0], "GROUP": fmt.Sprintf("agree-%d", i),
				"URL": "file://%OUT%", "PREFIX": "", "FORMAT": "jsonl", "ADMIN": "", "MEMORY": "1GiB",
				"KAFKA_EXTRA": "", "EXTRA": "", "TOPICS": "[events]",
			}
			for k, v := range tc.set {
				vals[k] = v
			}
			yaml := agreeYAML
			for k, v := range vals {
				yaml = strings.ReplaceAll(yaml, "%"+k+"%", v)
			}
			yaml = strings.ReplaceAll(yaml, "%OUT%", out)
			path := writeFile(t, "spillway.yaml", yaml)

			checkCode, checkOut, checkErr := cli(t, nil, "config", "check", path)
			r := runInProcess(t, path, nil)
			if tc.want == "" {
				if checkCode != exitOK {
					t.Errorf("config check: exit %d, want 0\n%s", checkCode, checkErr)
				}
				if !r.started || r.code != exitOK {
					t.Errorf("run: started=%v exit %d, want a start and exit 0 once cancelled\n%s", r.started, r.code, r.stderr)
				}
				return
			}
			if checkCode != exitUsage || r.code != exitUsage || r.started {
				t.Fatalf("config check: exit %d, run: exit %d (started=%v); want 2 from both\nconfig:\n%s\nconfig check stdout:\n%s\nconfig check stderr:\n%s\nrun stderr:\n%s",
					checkCode, r.code, r.started, yaml, checkOut, checkErr, r.stderr)
			}
			wantContains(t, "config check stderr", checkErr, tc.want)
			if r.stderr != checkErr {
				t.Errorf("run and config check say different things:\nrun:\n%s\nconfig check:\n%s", r.stderr, checkErr)
			}
		})
	}
}

// TestRunRelativeFileURL checks a relative local directory end to end:
// `config check` shows it resolved against the working directory, and `run`
// stores the records there.
func TestRunRelativeFileURL(t *testing.T) {
	keepGoMemLimit(t)
	dir := t.TempDir()
	t.Chdir(dir)
	cluster := testkit.NewCluster(t, 2, "events")
	const n = 40
	testkit.Produce(t, cluster.Client(t), "events", n, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	// Files rotate by count, so every record is stored without waiting on
	// max_age.
	path := writeFile(t, "spillway.yaml", fmt.Sprintf(`kafka:
  brokers: [%q]
  topics: [events]
storage:
  url: file:out/rel
file:
  max_records: 10
admin:
  listen: ""
backpressure:
  memory_limit: 1GiB
`, cluster.Addrs()[0]))

	code, stdout, stderr := cli(t, nil, "config", "check", path)
	wantCode(t, code, exitOK, stdout, stderr)
	want := filepath.Join(dir, "out", "rel")
	wantContains(t, "config check stdout", stdout, "url: file://"+want+"\n")

	stored := func() bool {
		if _, err := os.Stat(want); err != nil {
			return false
		}
		return len(testkit.ReadJSONL(t, want)) == n
	}
	r := runInProcess(t, path, stored)
	if !r.started || r.code != exitOK {
		t.Fatalf("run: started=%v exit %d, want exit 0\n%s", r.started, r.code, r.stderr)
	}
	recs := testkit.ReadJSONL(t, want)
	testkit.AssertExactlyOnce(t, recs, "events", map[int32]int64{0: n / 2, 1: n / 2})
}

// runResult is how an in-process `spillway run` ended.
type runResult struct {
	code    int
	started bool // it logged "spillway running" before it was cancelled
	stderr  string
}

// runInProcess runs `spillway run --config path` through runContext. If it
// starts (logs "spillway running"), it is left to run until done returns
// true (at once when done is nil), then cancelled as SIGTERM would, and its
// exit code is that of the graceful stop. Deadlines only stop a broken test
// from hanging.
func runInProcess(t *testing.T, path string, done func() bool) runResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &watchWriter{want: "spillway running", seen: make(chan struct{})}
	exited := make(chan int, 1)
	go func() {
		exited <- runContext(ctx, []string{"run", "--config", path}, &bytes.Buffer{}, stderr, nil)
	}()
	select {
	case code := <-exited:
		return runResult{code: code, stderr: stderr.String()}
	case <-stderr.seen:
	case <-time.After(waitDeadline):
		cancel()
		<-exited
		t.Fatalf("run neither started nor exited within %v\n%s", waitDeadline, stderr.String())
	}
	deadline := time.Now().Add(waitDeadline)
	for done != nil && !done() {
		select {
		case code := <-exited:
			t.Fatalf("run exited %d before the test's condition held\n%s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			<-exited
			t.Fatalf("the test's condition did not hold within %v\n%s", waitDeadline, stderr.String())
		}
	}
	cancel()
	select {
	case code := <-exited:
		return runResult{code: code, started: true, stderr: stderr.String()}
	case <-time.After(waitDeadline):
		t.Fatalf("run did not stop within %v of being cancelled\n%s", waitDeadline, stderr.String())
	}
	panic("unreachable")
}

// watchWriter keeps what is written and closes seen once want appears.
type watchWriter struct {
	want string
	seen chan struct{}

	mu   sync.Mutex
	b    strings.Builder
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// keepGoMemLimit restores the process's GOMEMLIMIT after the test: an
// in-process run sets it from backpressure.memory_limit.
func keepGoMemLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}
