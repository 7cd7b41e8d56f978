package runner

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

const (
	eventV1 = `{"type":"record","name":"Event","namespace":"t","fields":[
 {"name":"id","type":"long"},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"user","type":{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"tags","type":{"type":"array","items":"string"}}]}},
 {"name":"note","type":["null","string"],"default":null}]}`
	eventV2 = `{"type":"record","name":"Event","namespace":"t","fields":[
 {"name":"id","type":"long"},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"user","type":{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"tags","type":{"type":"array","items":"string"}}]}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"score","type":"double","default":0}]}`
	v1ID = 1
	v2ID = 2
)

var registrySeeds = []sr.SubjectSchema{
	{Subject: "events-value", Version: 1, ID: v1ID, Schema: sr.Schema{Type: sr.TypeAvro, Schema: eventV1}},
	{Subject: "events-value", Version: 2, ID: v2ID, Schema: sr.Schema{Type: sr.TypeAvro, Schema: eventV2}},
}

var eventT0 = time.UnixMilli(1733150000000).UTC()

// event is record i in the wire format with schema v1 or v2.
func event(t testing.TB, id, i int) []byte {
	t.Helper()
	v := map[string]any{"id": int64(i), "at": eventT0.Add(time.Duration(i) * time.Millisecond),
		"user": map[string]any{"name": fmt.Sprintf("u%d", i), "tags": []any{"a", fmt.Sprint(i)}}, "note": nil}
	schema := eventV1
	if id == v2ID {
		schema = eventV2
		v["score"] = float64(i) / 2
	}
	if i%5 == 0 {
		v["note"] = fmt.Sprintf("n%d", i)
	}
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, id, nil)
	b, err := avro.MustParse(schema).AppendEncode(b, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func registryConfig(cluster *testkit.Cluster, dir, url, typ, group string) *config.Config {
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Kafka.Group = group
	cfg.Format.Type = typ
	cfg.Format.Compression = "zstd"
	cfg.File.MaxRecords = 100_000
	cfg.File.MaxAge = time.Minute // files close on a schema change or at the stop
	cfg.SchemaRegistry = registry.Options{URL: url, Decode: "value"}
	return cfg
}

// drainThenStop runs cfg until n records are written or skipped by the
// error policy, then stops it gracefully, and returns its progress.
func drainThenStop(t *testing.T, cfg *config.Config, n int64) *Progress {
	t.Helper()
	progress, stop := started(t, cfg)
	waitFor(t, "every record written or skipped", func() bool {
		p := progress()
		return p != nil && p.Sink().Records+p.Sink().Skipped == n
	})
	p := progress()
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	return p
}

// dataPaths lists the data files under dir.
func dataPaths(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	if err := testkit.WalkOutput(dir, func(p string) error { out = append(out, p); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func sqlList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = outside.SQLString(p)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// TestRegistryEndToEnd produces Avro values in the wire format, v1 then v2
// then v1 again on partition 0, and v1 with one record without a header and
// one of an id the registry does not know on partition 1, and drains them
// into parquet and into avro: every typed record is stored once with its
// schema's types, each change of schema closed a file (2 rotations of
// reason schema), and the two bad records went to the error policy
// (errors.tolerance: all).
func TestRegistryEndToEnd(t *testing.T) {
	t.Parallel()
	reg := testkit.StartRegistry(t, registrySeeds, "", "")
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	var want int
	testkit.Produce(t, cl, "events", 800, func(i int) *kgo.Record {
		switch {
		case i < 300:
			want++
			return &kgo.Record{Partition: 0, Value: event(t, v1ID, i)}
		case i < 500:
			want++
			return &kgo.Record{Partition: 0, Value: event(t, v2ID, i)}
		case i < 600:
			want++
			return &kgo.Record{Partition: 0, Value: event(t, v1ID, i)}
		case i == 650:
			return &kgo.Record{Partition: 1, Value: []byte(`{"not":"in the wire format"}`)}
		case i == 700:
			b, _ := new(sr.ConfluentHeader).AppendEncode(nil, 99, nil)
			return &kgo.Record{Partition: 1, Value: append(b, 0)}
		}
		want++
		return &kgo.Record{Partition: 1, Value: event(t, v1ID, i)}
	})
	end := testkit.EndOffsets(t, cl, "events")

	for _, typ := range []string{"parquet", "avro"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			cfg := registryConfig(cluster, dir, reg.URL(), typ, "registry-"+typ)
			cfg.Errors.Tolerance = "all"
			// Files close on a schema change and at the stop (the stop
			// commits): stop once every record is handled.
			p := drainThenStop(t, cfg, 800)
			// After the stop: a record the encoder refuses is found on its
			// file's goroutine, after Write took it (see the sink's
			// pipeline), so it counts as skipped once its file is finished.
			st := p.Sink()
			if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); !maps.Equal(got, end) {
				t.Errorf("after stop, committed %v, want end offsets %v", got, end)
			}
			if st.Closed["schema"] != 2 || st.Skipped != 2 {
				t.Errorf("closed %v, skipped %d; want 2 rotations of reason schema and 2 records skipped", st.Closed, st.Skipped)
			}
			paths := dataPaths(t, dir)
			// Partition 0: v1, v2, v1; partition 1: one file.
			if len(paths) != 4 {
				t.Errorf("%d data files, want 4: %v", len(paths), paths)
			}
			if typ == "parquet" {
				checkParquetEvents(t, paths, want)
			} else {
				checkAvroEvents(t, paths, want)
			}
		})
	}
}

func checkParquetEvents(t *testing.T, paths []string, want int) {
	db := outside.NewDuckDB(t)
	src := "read_parquet(" + sqlList(paths) + ", union_by_name = true)"
	res := db.Query(t,
		"SELECT count(*)::DOUBLE AS n, count(DISTINCT value.id)::DOUBLE AS ids, count(score)::DOUBLE AS scored FROM (SELECT value, value.score AS score FROM "+src+")",
		"SELECT typeof(value.at) AS at, typeof(value.user) AS u, typeof(value.note) AS note FROM "+src+" LIMIT 1",
		"SELECT value.id::DOUBLE AS id, epoch_ms(value.at)::DOUBLE AS at, value.user.name AS name, value.user.tags[2] AS tag, value.note AS note, \"offset\"::DOUBLE AS off FROM "+src+" WHERE value.id IN (5, 450) ORDER BY 1",
	)
	if got := res[0][0]; fmt.Sprint(got["n"]) != fmt.Sprint(want) || fmt.Sprint(got["ids"]) != fmt.Sprint(want) || fmt.Sprint(got["scored"]) != "200" {
		t.Errorf("counts %v, want %d rows, %d distinct ids, 200 with v2's score", got, want, want)
	}
	if got := res[1][0]; got["at"] != "TIMESTAMP WITH TIME ZONE" || got["u"] != `STRUCT("name" VARCHAR, tags VARCHAR[])` || got["note"] != "VARCHAR" {
		t.Errorf("types %v", got)
	}
	rows := res[2]
	if len(rows) != 2 || fmt.Sprint(rows[0]["at"]) != fmt.Sprint(eventT0.UnixMilli()+5) || rows[0]["name"] != "u5" || rows[0]["tag"] != "5" || rows[0]["note"] != "n5" ||
		fmt.Sprint(rows[1]["off"]) != "450" || rows[1]["note"] != "n450" {
		t.Errorf("rows %v", rows)
	}
}

func checkAvroEvents(t *testing.T, paths []string, want int) {
	files := outside.ReadAvroPython(t, paths...)
	n := 0
	ids := map[float64]bool{}
	for _, f := range files {
		for _, r := range f.Records {
			n++
			v, ok := r["value"].(map[string]any)
			if !ok {
				t.Fatalf("%s: value %T, want a record", f.Path, r["value"])
			}
			id := v["id"].(float64)
			ids[id] = true
			if v["at"] != float64(eventT0.UnixMilli())+id {
				t.Fatalf("%s: at %v for id %v", f.Path, v["at"], id)
			}
			_, scored := v["score"]
			if scored != (id >= 300 && id < 500) {
				t.Fatalf("%s: id %v has score %v: a file mixes schemas", f.Path, id, scored)
			}
		}
		if !strings.Contains(string(f.Schema), `"timestamp-millis"`) || !strings.Contains(string(f.Schema), `"User"`) {
			t.Errorf("%s: schema %s does not embed the registered one", f.Path, f.Schema)
		}
	}
	if n != want || len(ids) != want {
		t.Errorf("%d records, %d distinct ids; want %d", n, len(ids), want)
	}
}

// TestRegistryUnknownIDFails: with errors.tolerance none, an id the
// registry does not know stops the run, naming the record.
func TestRegistryUnknownIDFails(t *testing.T) {
	t.Parallel()
	reg := testkit.StartRegistry(t, registrySeeds, "", "")
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 3, func(i int) *kgo.Record {
		if i == 1 {
			b, _ := new(sr.ConfluentHeader).AppendEncode(nil, 42, nil)
			return &kgo.Record{Value: append(b, 0)}
		}
		return &kgo.Record{Value: event(t, v1ID, i)}
	})
	cfg := registryConfig(cluster, t.TempDir(), reg.URL(), "parquet", "registry-unknown")
	err := runToFailure(t, cfg)
	for _, part := range []string{"events/0@1", "schema id 42 does not exist in the registry", "errors.tolerance: all"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
}

// TestRegistryDownThenUp: with the registry stopped, nothing is written
// or committed and the run waits, saying why: in its logs, and in its
// status and metrics (waiting, failed tries, the records lagging), without
// calling it a stall past admin.stall_timeout: a restart would not bring
// the registry back. Once the registry is back on the same port, every
// record is stored exactly once.
func TestRegistryDownThenUp(t *testing.T) {
	reg := testkit.StartRegistry(t, registrySeeds, "", "")
	reg.Stop()
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	const n = 1000
	testkit.Produce(t, cl, "events", n, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: event(t, v1ID, i)}
	})
	end := testkit.EndOffsets(t, cl, "events")
	dir := t.TempDir()
	cfg := registryConfig(cluster, dir, reg.URL(), "parquet", "registry-down")
	cfg.Admin.StallTimeout = time.Second
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var progress atomic.Pointer[Progress]
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, log, Options{OnStart: progress.Store}) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	waitFor(t, "the run to say the registry is unreachable", func() bool {
		return len(logs.lines("schema registry unreachable")) >= 2
	})
	if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); len(got) != 0 {
		t.Errorf("committed %v while the registry was down", got)
	}
	if st := progress.Load().Sink(); st.Records != 0 || st.FilesOpen != 0 {
		t.Errorf("records written while the registry was down: %+v", st)
	}
	// Past the stall timeout, with records lagging, the status says why.
	downSince := time.Now()
	waitFor(t, "the registry down for longer than admin.stall_timeout, with lag", func() bool {
		st := progress.Load().Status()
		return time.Since(downSince) > 2*cfg.Admin.StallTimeout && st.LagRecords > 0
	})
	st := progress.Load().Status()
	if r := st.SchemaRegistry; r == nil || !r.Waiting || r.FailedTries < 2 || r.SchemasFetched != 0 {
		t.Errorf("status while the registry is down: %+v, want waiting with failed tries", r)
	}
	if st.Stalled {
		t.Errorf("status while the registry is down says stalled: %s", st.StalledReason)
	}
	srv := httptest.NewServer(admin.New("", admin.SourceFunc(progress.Load().Status), nil).Handler())
	m := scrapeMetrics(t, strings.TrimPrefix(srv.URL, "http://"))
	srv.Close()
	if m.samples["spillway_schema_registry_waiting"] != 1 || m.samples["spillway_schema_registry_failed_requests_total"] < 2 ||
		!m.names["spillway_schema_registry_schemas_fetched_total"] || m.samples["spillway_stalled"] != 0 {
		t.Errorf("metrics while the registry is down: waiting %v, failed %v, stalled %v",
			m.samples["spillway_schema_registry_waiting"], m.samples["spillway_schema_registry_failed_requests_total"], m.samples["spillway_stalled"])
	}
	reg.Start()
	waitFor(t, "every record written", func() bool { return progress.Load().Sink().Records == n })
	cancel()
	stopped = true
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); !maps.Equal(got, end) {
		t.Errorf("after stop, committed %v, want end offsets %v", got, end)
	}
	db := outside.NewDuckDB(t)
	res := db.Query(t, "SELECT count(*)::DOUBLE AS n, count(DISTINCT value.id)::DOUBLE AS ids FROM read_parquet("+sqlList(dataPaths(t, dir))+")")
	if got := res[0][0]; fmt.Sprint(got["n"]) != fmt.Sprint(n) || fmt.Sprint(got["ids"]) != fmt.Sprint(n) {
		t.Errorf("stored %v, want %d records, each once", got, n)
	}
	if len(logs.lines("schema registry answers again")) == 0 {
		t.Error("no log line says the registry is back")
	}
	if r := progress.Load().Status().SchemaRegistry; r == nil || r.Waiting || r.SchemasFetched != 1 {
		t.Errorf("status after the registry came back: %+v, want not waiting, one schema fetched", r)
	}
}

// TestRegistryNullKeysOneFile: with keys and values decoded, a partition
// whose keys are sometimes null goes into one typed file: a null key fits
// the open file of its value's schema (format.Typed.Fits). It used to
// close the file at every change between a null and a typed key.
func TestRegistryNullKeysOneFile(t *testing.T) {
	t.Parallel()
	const keyID = 3
	keySchema := `{"type":"record","name":"Key","namespace":"t","fields":[{"name":"id","type":"long"}]}`
	seeds := append(slices.Clone(registrySeeds), sr.SubjectSchema{Subject: "events-key", Version: 1, ID: keyID, Schema: sr.Schema{Type: sr.TypeAvro, Schema: keySchema}})
	reg := testkit.StartRegistry(t, seeds, "", "")
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	const n = 300
	testkit.Produce(t, cl, "events", n, func(i int) *kgo.Record {
		r := &kgo.Record{Value: event(t, v1ID, i)}
		if i%3 != 1 { // the first key is typed: a file opened by a null key has no key type
			r.Key, _ = new(sr.ConfluentHeader).AppendEncode(nil, keyID, nil)
			r.Key, _ = avro.MustParse(keySchema).AppendEncode(r.Key, map[string]any{"id": int64(i)})
		}
		return r
	})
	for _, typ := range []string{"parquet", "avro"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			cfg := registryConfig(cluster, dir, reg.URL(), typ, "registry-null-keys-"+typ)
			cfg.SchemaRegistry.Decode = "both"
			p := drainThenStop(t, cfg, n)
			if st := p.Sink(); st.Closed["schema"] != 0 || st.Skipped != 0 {
				t.Errorf("closed %v, skipped %d: want no rotation for a schema, nothing skipped", st.Closed, st.Skipped)
			}
			paths := dataPaths(t, dir)
			if len(paths) != 1 {
				t.Fatalf("%d data files, want 1", len(paths))
			}
			keys, nulls := 0, 0
			if typ == "parquet" {
				res := outside.NewDuckDB(t).Query(t, "SELECT count(key.id)::DOUBLE AS k, count(*) FILTER (WHERE key IS NULL)::DOUBLE AS nk, count(DISTINCT value.id)::DOUBLE AS v FROM read_parquet("+sqlList(paths)+")")
				if got := res[0][0]; fmt.Sprint(got["v"]) != fmt.Sprint(n) {
					t.Errorf("%v distinct values, want %d", got["v"], n)
				}
				keys, _ = strconv.Atoi(fmt.Sprint(res[0][0]["k"]))
				nulls, _ = strconv.Atoi(fmt.Sprint(res[0][0]["nk"]))
			} else {
				for _, f := range outside.ReadAvroPython(t, paths...) {
					for _, r := range f.Records {
						if r["key"] == nil {
							nulls++
						} else {
							keys++
						}
					}
				}
			}
			if keys != 2*n/3 || nulls != n/3 {
				t.Errorf("%d typed keys and %d null keys, want %d and %d", keys, nulls, 2*n/3, n/3)
			}
		})
	}
}

// TestRegistryDownStop: a graceful stop while the registry can't be
// reached (its port closed, or it answers 500) ends at once and cleanly:
// nothing is written or committed, the member leaves the group, Run
// returns nil (exit 0), and the stop logs a handful of lines. The stop
// used to spin between the resolving stage, which took nothing, and the
// source, which asked again at once (~30k log lines a second), until
// shutdown.timeout ended it with "context canceled", the group not left.
// The 500 is an httptest handler: no registry can be told to fail so.
func TestRegistryDownStop(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 200, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: event(t, v1ID, i)}
	})
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error_code":50001,"message":"store unavailable"}`))
	}))
	defer failing.Close()
	closed := testkit.StartRegistry(t, registrySeeds, "", "")
	closed.Stop()
	for name, url := range map[string]string{"closed-port": closed.URL(), "http-500": failing.URL} {
		t.Run(name, func(t *testing.T) {
			group := "registry-down-stop-" + name
			cfg := registryConfig(cluster, t.TempDir(), url, "parquet", group)
			logs := &logBuffer{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{}) }()
			waitFor(t, "the run to say the registry is unreachable twice", func() bool {
				return len(logs.lines("schema registry unreachable")) >= 2
			})
			before := len(logs.lines(""))
			cancel()
			if err := <-done; err != nil {
				t.Errorf("stop while the registry is down: %v, want a clean stop", err)
			}
			all := logs.lines("")
			if after := len(all) - before; after > 20 {
				t.Errorf("%d log lines after the stop, want a handful; the last: %s", after, all[len(all)-1])
			}
			if len(logs.lines("stopped cleanly")) != 1 {
				t.Errorf("no \"stopped cleanly\" line; logged after the stop: %s", strings.Join(all[before:min(len(all), before+10)], "\n"))
			}
			if got := testkit.CommittedOffsets(t, cl, group, "events"); len(got) != 0 {
				t.Errorf("committed %v, want nothing: no record was written", got)
			}
			groups, err := kadm.NewClient(cl).DescribeGroups(t.Context(), group)
			if err != nil {
				t.Fatal(err)
			}
			if g := groups[group]; len(g.Members) != 0 {
				t.Errorf("group %s still has %d members after the stop (state %s): the member did not leave", group, len(g.Members), g.State)
			}
		})
	}
}
