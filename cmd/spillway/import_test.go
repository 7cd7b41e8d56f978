package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/testkit"
)

// importFile runs `spillway config import` on a connector config and
// returns the path of the YAML it printed.
func importFile(t *testing.T, name, connector string) string {
	t.Helper()
	in := writeFile(t, name, connector)
	code, out, errOut := cli(t, nil, "config", "import", in)
	wantCode(t, code, exitOK, out, errOut)
	p := filepath.Join(t.TempDir(), "spillway.yaml")
	if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runEnv points an imported config at the test's broker and a local
// directory, as a user would with the environment.
func runEnv(broker, dir string) []string {
	return []string{
		"SPILLWAY_KAFKA_BROKERS=" + broker,
		"SPILLWAY_STORAGE_URL=file://" + dir,
		"SPILLWAY_ADMIN_LISTEN=",
		"SPILLWAY_BACKPRESSURE_MEMORY_LIMIT=128MiB",
		"SPILLWAY_FILE_MAX_AGE=1h", // files close on their record count, or at the stop
	}
}

// drain runs the config until its group has committed every record of
// topic, then stops it gracefully.
func drain(t *testing.T, cfgPath string, env []string, cl *kgo.Client, topic string) *config.Config {
	t.Helper()
	keepGoMemLimit(t)
	cfg, err := config.Load(cfgPath, env)
	if err != nil {
		t.Fatal(err)
	}
	end := testkit.EndOffsets(t, cl, topic)
	testkit.RunUntilCommitted(t, cl, cfg.Kafka.Group, topic, end, func(ctx context.Context) error {
		return runner.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), runner.Options{})
	})
	return cfg
}

// dataFiles lists the files under dir, as slash-separated keys, without
// Spillway's own ledger.
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel = filepath.ToSlash(rel); !strings.Contains(rel, "_spillway/") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

const hour3 = "2026-01-02T03:04:05Z"

// TestImportedConfigsKeepTheConnectorsNames drains one topic with four
// imported configs, two of Aiven's and two of Confluent's, and checks that
// the objects have the exact names the connector would have given them,
// built here from each product's documented rules (not from Spillway's
// templates), and that verify agrees with what was stored.
func TestImportedConfigsKeepTheConnectorsNames(t *testing.T) {
	const topic, perPartition, flush = "orders", 200, 100
	cluster := testkit.NewCluster(t, 2, topic)
	cl := cluster.Client(t)
	h3, _ := time.Parse(time.RFC3339, hour3)
	// Each partition: offsets 0-99 at 03:xx, 100-199 at 04:xx.
	testkit.Produce(t, cl, topic, 2*perPartition, func(i int) *kgo.Record {
		p, n := i%2, i/2
		ts := h3.Add(time.Duration(n) * 10 * time.Second)
		if n >= flush {
			ts = h3.Add(time.Hour + time.Duration(n-flush)*10*time.Second)
		}
		return &kgo.Record{Partition: int32(p), Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, `{"p":%d,"n":%d}`, p, n), Timestamp: ts}
	})
	starts := []int64{0, flush}
	for _, tc := range []struct {
		name, file, connector string
		want                  func(p int32, start int64) string
		check                 func(t *testing.T, dir string, names []string)
	}{{
		// Aiven's default template, with S3's default gzip: the
		// compression's extension only.
		name: "aiven-s3", file: "aiven.properties",
		connector: "name=orders-aiven-s3\nconnector.class=io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector\n" +
			"topics=orders\naws.s3.bucket.name=b\naws.s3.region=eu-west-1\nformat.output.type=jsonl\nformat.output.fields=key,value,offset\nfile.max.records=100\n",
		want: func(p int32, start int64) string { return fmt.Sprintf("%s-%d-%d.gz", topic, p, start) },
	}, {
		// A prefix, and offsets and partitions zero-padded to 20 and 10
		// digits; a template that is set gets no extension.
		name: "aiven-gcs", file: "aiven-gcs.json",
		connector: `{"name":"orders-aiven-gcs","config":{"connector.class":"io.aiven.kafka.connect.gcs.GcsSinkConnector","topics":"orders",` +
			`"gcs.bucket.name":"b","file.name.prefix":"raw/","file.name.template":"{{topic}}-{{partition:padding=true}}-{{start_offset:padding=true}}",` +
			`"file.max.records":"100"}}`,
		want: func(p int32, start int64) string { return fmt.Sprintf("raw/%s-%010d-%020d", topic, p, start) },
	}, {
		// DefaultPartitioner: topics/<topic>/partition=<p>/<topic>+<p>+<offset, 10 digits>.json.gz
		name: "confluent-default", file: "confluent.properties",
		connector: "name=orders-confluent\nconnector.class=io.confluent.connect.s3.S3SinkConnector\ntopics=orders\ns3.bucket.name=b\n" +
			"format.class=io.confluent.connect.s3.format.json.JsonFormat\ns3.compression.type=gzip\nflush.size=100\n",
		want: func(p int32, start int64) string {
			return fmt.Sprintf("topics/%s/partition=%d/%s+%d+%010d.json.gz", topic, p, topic, p, start)
		},
		check: func(t *testing.T, dir string, names []string) {
			// The values alone, one per line, as Confluent's JsonFormat.
			for _, name := range names {
				f, err := os.Open(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				zr, err := gzip.NewReader(f)
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(zr)
				for sc.Scan() {
					var v struct{ P, N int }
					if err := json.Unmarshal(sc.Bytes(), &v); err != nil || !strings.HasPrefix(sc.Text(), `{"p":`) {
						t.Fatalf("%s: line %q is not a bare value: %v", name, sc.Text(), err)
					}
				}
				f.Close()
			}
		},
	}, {
		// TimeBasedPartitioner on the record's time, hourly.
		name: "confluent-hourly", file: "confluent-hourly.json",
		connector: `{"name":"orders-hourly","config":{"connector.class":"io.confluent.connect.s3.S3SinkConnector","topics":"orders","s3.bucket.name":"b",` +
			`"format.class":"io.confluent.connect.s3.format.json.JsonFormat","flush.size":"100",` +
			`"partitioner.class":"io.confluent.connect.storage.partitioner.TimeBasedPartitioner","path.format":"'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",` +
			`"partition.duration.ms":"3600000","locale":"en-US","timezone":"UTC","timestamp.extractor":"Record"}}`,
		want: func(p int32, start int64) string {
			hour := 3 + start/flush // the records of each file are in one hour
			return fmt.Sprintf("topics/%s/year=2026/month=01/day=02/hour=%02d/%s+%d+%010d.json", topic, hour, topic, p, start)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := runEnv(cluster.Addrs()[0], dir)
			cfgPath := importFile(t, tc.file, tc.connector)
			code, out, errOut := cli(t, env, "config", "check", cfgPath)
			wantCode(t, code, exitOK, out, errOut)
			drain(t, cfgPath, env, cl, topic)
			var want []string
			for p := range int32(2) {
				for _, s := range starts {
					want = append(want, tc.want(p, s))
				}
			}
			sort.Strings(want)
			got := dataFiles(t, dir)
			if !slices.Equal(got, want) {
				t.Fatalf("object names:\n got %q\nwant %q", got, want)
			}
			if tc.check != nil {
				tc.check(t, dir, got)
			}
			code, out, errOut = cli(t, env, "verify", "--config", cfgPath, "--deep")
			wantCode(t, code, exitOK, out, errOut)
			wantContains(t, "verify", out, "orders/0: ok", "orders/1: ok")
		})
	}
}

// TestCutOverFromConnect continues a Confluent connector's work: its files
// and its group's commits are as Connect leaves them after a graceful
// stop, and Spillway, with the imported config, stores every record after
// the commits, once, beside the connector's files. Across the two writers
// each record is stored exactly once, and verify is content.
func TestCutOverFromConnect(t *testing.T) {
	const topic, perPartition, flush = "payments", 300, 50
	cluster := testkit.NewCluster(t, 2, topic)
	cl := cluster.Client(t)
	testkit.Produce(t, cl, topic, 2*perPartition, func(i int) *kgo.Record {
		p, n := i%2, i/2
		return &kgo.Record{Partition: int32(p), Value: fmt.Appendf(nil, `{"p":%d,"n":%d}`, p, n)}
	})
	dir := t.TempDir()
	// What the connector left: whole files of flush.size records (an
	// open file is dropped at its stop, its multipart upload never
	// completed), and the group's commit at their end. Partition 1 it had
	// stored whole: Spillway writes nothing there.
	connectEnd := map[int32]int64{0: 100, 1: perPartition}
	for p, end := range connectEnd {
		for start := int64(0); start < end; start += flush {
			key := fmt.Sprintf("topics/%s/partition=%d/%s+%d+%010d.json", topic, p, topic, p, start)
			var b strings.Builder
			for n := start; n < start+flush; n++ {
				fmt.Fprintf(&b, `{"p":%d,"n":%d}`+"\n", p, n)
			}
			path := filepath.Join(dir, filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	const name = "payments-s3"
	offsets := kadm.Offsets{}
	for p, end := range connectEnd {
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: end, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "connect-"+name, offsets); err != nil {
		t.Fatal(err)
	}

	cfgPath := importFile(t, "payments.properties", "name="+name+"\nconnector.class=io.confluent.connect.s3.S3SinkConnector\ntopics="+topic+
		"\ns3.bucket.name=b\ns3.region=eu-west-1\nformat.class=io.confluent.connect.s3.format.json.JsonFormat\nflush.size=50\n")
	env := runEnv(cluster.Addrs()[0], dir)
	drain(t, cfgPath, env, cl, topic)

	// Every record exactly once, in the connector's files or Spillway's,
	// all named by the connector's rule.
	seen := map[[2]int]int{}
	for _, key := range dataFiles(t, dir) {
		var p, start int
		var tp string
		if _, err := fmt.Sscanf(key, "topics/payments/partition=%d/%s", &p, &tp); err != nil {
			t.Fatalf("%s is not named by Confluent's rule: %v", key, err)
		}
		if _, err := fmt.Sscanf(tp, "payments+%d+%d.json", new(int), &start); err != nil || tp != fmt.Sprintf("payments+%d+%010d.json", p, start) {
			t.Fatalf("%s is not named by Confluent's rule", key)
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			var v struct{ P, N int }
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%s: %q: %v", key, line, err)
			}
			if v.P != p || v.N != start+i {
				t.Fatalf("%s line %d holds %+v, want partition %d record %d", key, i, v, p, start+i)
			}
			seen[[2]int{v.P, v.N}]++
		}
	}
	for p := range 2 {
		for n := range perPartition {
			if c := seen[[2]int{p, n}]; c != 1 {
				t.Errorf("partition %d record %d stored %d times", p, n, c)
			}
		}
	}
	if len(seen) != 2*perPartition {
		t.Errorf("%d distinct records stored, want %d", len(seen), 2*perPartition)
	}
	code, out, errOut := cli(t, env, "verify", "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify", out, "payments/0: ok", "payments/1: ok", `8 files written before the cut-over (storage.earlier_files: foreign), not checked`)
}

// TestConfigImportBadInput: input that can't be imported exits 2 with the
// reason, and prints no YAML.
func TestConfigImportBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		args                []string
		want                string
	}{
		{"not JSON", "c.json", "{\"name\": \"x\",\n \"config\": {\"topics\": }}\n", nil, "is not valid JSON (line 2"},
		{"unknown class", "c.properties", "name=x\nconnector.class=com.example.FileSinkConnector\n", nil, `connector.class "com.example.FileSinkConnector" is not a connector Spillway imports`},
		{"template", "c.properties", "name=x\nconnector.class=io.aiven.kafka.connect.azure.sink.AzureBlobSinkConnector\nazure.storage.container.name=c\ntopics=t\nfile.name.template={{topic}}-{{start_offset}}\n", nil,
			"template has no {{partition}}"},
		{"from", "c.properties", "name=x\nconnector.class=io.aiven.kafka.connect.gcs.GcsSinkConnector\n", []string{"--from", "confluent"}, "is Aiven's GCS sink, not --from confluent"},
		{"missing file", "", "", nil, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent.json")
			if tc.file != "" {
				path = writeFile(t, tc.file, tc.content)
			}
			code, out, errOut := cli(t, nil, append([]string{"config", "import", path}, tc.args...)...)
			wantCode(t, code, exitUsage, out, errOut)
			wantContains(t, "stderr", errOut, tc.want)
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
		})
	}
}

// TestConfigImportExamplesPassCheck: every example in the testdata of
// internal/connect/aiven, confluent and icebergsink, imported by the
// command, passes `config check`.
func TestConfigImportExamplesPassCheck(t *testing.T) {
	ins, err := filepath.Glob("../../internal/connect/*/testdata/*.*")
	if err != nil {
		t.Fatal(err)
	}
	n, ice := 0, 0
	for _, in := range ins {
		if strings.HasSuffix(in, ".yaml") {
			continue
		}
		n++
		if strings.Contains(in, "/icebergsink/") {
			ice++
		}
		code, out, errOut := cli(t, nil, "config", "import", in)
		wantCode(t, code, exitOK, out, errOut)
		p := writeFile(t, "imported.yaml", out)
		var env []string
		for _, v := range []string{"SPILLWAY_KAFKA_SASL_PASSWORD", "SPILLWAY_SCHEMA_REGISTRY_PASSWORD", "SPILLWAY_ICEBERG_CATALOG_CREDENTIAL"} {
			if strings.Contains(out, v) {
				env = append(env, v+"=x") // as its header says
			}
		}
		code, out, errOut = cli(t, env, "config", "check", p)
		if code != exitOK {
			t.Errorf("%s: config check exit %d\n%s%s", in, code, out, errOut)
		}
	}
	if n < 6 || ice < 3 {
		t.Errorf("only %d examples, %d of them Iceberg's", n, ice)
	}
}

// TestCutOverAfterConnectCrash: a connector that died, rather than
// stopped, may leave a finished file past its commit. Spillway's first file
// there has the same name; it stops, naming it, rather than overwrite it.
// Once the file is deleted (its records are uncommitted), the run stores
// them, and every record is stored once.
func TestCutOverAfterConnectCrash(t *testing.T) {
	const topic, perPartition, flush = "refunds", 100, 50
	cluster := testkit.NewCluster(t, 1, topic)
	cl := cluster.Client(t)
	testkit.Produce(t, cl, topic, perPartition, func(i int) *kgo.Record {
		return &kgo.Record{Value: fmt.Appendf(nil, `{"p":0,"n":%d}`, i)}
	})
	dir := t.TempDir()
	late := ""
	for start := 0; start < 2*flush; start += flush { // [0,50) committed, [50,100) not
		key := fmt.Sprintf("topics/%s/partition=0/%s+0+%010d.json", topic, topic, start)
		var b strings.Builder
		for n := start; n < start+flush; n++ {
			fmt.Fprintf(&b, `{"p":0,"n":%d}`+"\n", n)
		}
		path := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		late = key
	}
	const name = "refunds-s3"
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: flush, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "connect-"+name, offsets); err != nil {
		t.Fatal(err)
	}
	cfgPath := importFile(t, "refunds.properties", "name="+name+"\nconnector.class=io.confluent.connect.s3.S3SinkConnector\ntopics="+topic+
		"\ns3.bucket.name=b\nformat.class=io.confluent.connect.s3.format.json.JsonFormat\nflush.size=50\n")
	env := runEnv(cluster.Addrs()[0], dir)
	keepGoMemLimit(t)
	cfg, err := config.Load(cfgPath, env)
	if err != nil {
		t.Fatal(err)
	}
	// The file at the commit collides: the run stops by itself, with the
	// collision, even though no record arrives after it.
	var progress atomic.Pointer[runner.Progress]
	done := make(chan error, 1)
	go func() {
		done <- runner.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), runner.Options{OnStart: func(p *runner.Progress) { progress.Store(p) }})
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("the run went on after the colliding upload failed")
	}
	if p := progress.Load(); p != nil && p.Sink().FilesUploaded != 0 {
		t.Fatalf("the colliding file was published: %+v", p.Sink())
	}
	if err == nil || !strings.Contains(err.Error(), path.Base(late)) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("run: %v; want an error naming %s", err, late)
	}
	if got := testkit.CommittedOffsets(t, cl, "connect-"+name, topic); got[0] != flush {
		t.Fatalf("committed %v after the collision, want %d", got, flush)
	}
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(late))); err != nil {
		t.Fatal(err)
	}
	drain(t, cfgPath, env, cl, topic)
	seen := map[int]int{}
	for _, key := range dataFiles(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			var v struct{ N int }
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%s: %q: %v", key, line, err)
			}
			seen[v.N]++
		}
	}
	for n := range perPartition {
		if seen[n] != 1 {
			t.Errorf("record %d stored %d times", n, seen[n])
		}
	}
}

// TestImportedAvroConverterDecodes: a Confluent sink of AvroConverter
// values through a registry with basic auth, that skipped bad records
// (errors.tolerance=all), imported and run, stores every record as the
// registered Avro record it is, in files named as Confluent names them,
// rather than skipping them all as undecodable bytes (issue #22, case 5).
// The warnings go to stderr and stdout is the YAML alone.
func TestImportedAvroConverterDecodes(t *testing.T) {
	const topic, n, flush = "orders", 20, 10
	const schema = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"sku","type":"string"}]}`
	reg := testkit.StartRegistry(t, []sr.SubjectSchema{
		{Subject: topic + "-value", Version: 1, ID: 7, Schema: sr.Schema{Type: sr.TypeAvro, Schema: schema}},
	}, "sr-user", "sr-pass")
	cluster := testkit.NewCluster(t, 1, topic)
	cl := cluster.Client(t)
	testkit.Produce(t, cl, topic, n, func(i int) *kgo.Record {
		b, _ := new(sr.ConfluentHeader).AppendEncode(nil, 7, nil)
		b, err := avro.MustParse(schema).AppendEncode(b, map[string]any{"id": int64(i), "sku": fmt.Sprintf("sku-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: b}
	})
	in := writeFile(t, "orders.properties", "name=orders-avro\nconnector.class=io.confluent.connect.s3.S3SinkConnector\ntopics="+topic+
		"\ns3.bucket.name=b\nformat.class=io.confluent.connect.s3.format.avro.AvroFormat\nflush.size=10\n"+
		"key.converter=org.apache.kafka.connect.storage.StringConverter\nvalue.converter=io.confluent.connect.avro.AvroConverter\n"+
		"value.converter.schema.registry.url="+reg.URL()+"\nvalue.converter.basic.auth.credentials.source=USER_INFO\n"+
		"value.converter.basic.auth.user.info=sr-user:sr-pass\nerrors.tolerance=all\n")
	code, out, errOut := cli(t, nil, "config", "import", in)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "stderr", errOut, "spillway: warning: errors.tolerance=all: Spillway skips every record it can't write",
		"spillway: warning: rotate.interval.ms and rotate.schedule.interval.ms are not set")
	wantContains(t, "stdout", out, "schema_registry:", "url: '"+reg.URL()+"'", "username: sr-user", "decode: value")
	if strings.Contains(out, "warning") || strings.Contains(out, "sr-pass") {
		t.Errorf("stdout holds a warning or the password:\n%s", out)
	}
	cfgPath := writeFile(t, "spillway.yaml", out)
	dir := t.TempDir()
	env := append(runEnv(cluster.Addrs()[0], dir), "SPILLWAY_SCHEMA_REGISTRY_PASSWORD=sr-pass")
	cfg := drain(t, cfgPath, env, cl, topic)
	if cfg.Errors.Tolerance != "all" || !cfg.SchemaRegistry.DecodeValues() {
		t.Fatalf("imported config: tolerance %q, decode values %v", cfg.Errors.Tolerance, cfg.SchemaRegistry.DecodeValues())
	}
	names := dataFiles(t, dir)
	want := []string{"topics/orders/partition=0/orders+0+0000000000.avro", "topics/orders/partition=0/orders+0+0000000010.avro"}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	// The files are read with the schema in their header, as any Avro
	// reader would (python3-avro is not needed to tell a decoded record
	// from a skipped one).
	seen := 0
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := ocf.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s := string(r.Metadata()["avro.schema"]); !strings.Contains(s, `"Order"`) || !strings.Contains(s, `"sku"`) {
			t.Errorf("%s: schema %s is not the registered one", name, s)
		}
		for {
			var rec struct {
				ID  int64  `avro:"id"`
				SKU string `avro:"sku"`
			}
			if err := r.Decode(&rec); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if rec.ID != int64(seen) || rec.SKU != fmt.Sprintf("sku-%d", seen) {
				t.Fatalf("%s: record %+v, want id %d", name, rec, seen)
			}
			seen++
		}
		_ = r.Close()
	}
	if seen != n {
		t.Errorf("%d records stored, want %d", seen, n)
	}
}
