package runner

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// Protobuf and JSON Schema versions of the Avro events above: the same
// columns (id, at, user, note; v2 adds score), so that DuckDB reads all
// files together. Protobuf's schemas also hold a recursive message.
const (
	jsV1ID = 41
	jsV2ID = 42
	pbV1ID = 43
	pbV2ID = 44

	jsEventV1 = `{"type": "object", "properties": {
  "id": {"type": "integer"},
  "at": {"type": "string", "format": "date-time"},
  "user": {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "tags"]},
  "note": {"type": ["string", "null"]}%s},
 "required": ["id", "at", "user"%s]}`
	pbEvent = `syntax = "proto3";
package ev;
import "google/protobuf/timestamp.proto";
message Event { int64 id = 1; google.protobuf.Timestamp at = 2; User user = 3; optional string note = 4;%s }
message User { string name = 1; repeated string tags = 2; }
message Tree { string name = 1; repeated Tree children = 2; }`
)

var (
	jsEventV2            = fmt.Sprintf(jsEventV1, `, "score": {"type": "number"}`, `, "score"`)
	columnsRegistrySeeds = []sr.SubjectSchema{
		{Subject: "js-value", Version: 1, ID: jsV1ID, Schema: sr.Schema{Type: sr.TypeJSON, Schema: fmt.Sprintf(jsEventV1, "", "")}},
		{Subject: "js-value", Version: 2, ID: jsV2ID, Schema: sr.Schema{Type: sr.TypeJSON, Schema: jsEventV2}},
		{Subject: "pb-value", Version: 1, ID: pbV1ID, Schema: sr.Schema{Type: sr.TypeProtobuf, Schema: fmt.Sprintf(pbEvent, "")}},
		{Subject: "pb-value", Version: 2, ID: pbV2ID, Schema: sr.Schema{Type: sr.TypeProtobuf, Schema: fmt.Sprintf(pbEvent, " double score = 5;")}},
	}
)

// columnsEvent is event i as JSON (protojson takes the same), with v2's score.
func columnsEvent(i int, v2 bool) string {
	note := "null"
	if i%5 == 0 {
		note = fmt.Sprintf(`"n%d"`, i)
	}
	at := eventT0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
	js := fmt.Sprintf(`{"id": %d, "at": %q, "user": {"name": "u%d", "tags": ["a", "%d"]}, "note": %s`, i, at, i, i, note)
	if v2 {
		js += fmt.Sprintf(`, "score": %v`, float64(i)/2)
	}
	return js + "}"
}

func wireColumnsJSON(id int, js string) []byte {
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, id, nil)
	return append(b, js...)
}

// wireColumnsProto is message idx of id, given as protojson, in the wire format.
func wireColumnsProto(t testing.TB, compiled *registry.Registry, id, idx int, js string) []byte {
	t.Helper()
	s, _ := compiled.Lookup(id)
	m := dynamicpb.NewMessage(s.Proto.Messages().Get(idx))
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, id, []int{idx})
	return append(b, data...)
}

// TestRegistryColumnsEndToEnd: JSON Schema values on partition 0 (v1, v2,
// v1 again, and one value of the wrong type) and Protobuf values on
// partition 1 (v1, v2, and one of a recursive message), through the fakesr
// registry process, drained into parquet and avro: every good record is
// stored once with typed columns, each change of schema closed a file (3
// rotations of reason schema), and the two bad records went to the error
// policy. A value with a property its JSON Schema does not declare is
// written without it, and counted.
func TestRegistryColumnsEndToEnd(t *testing.T) {
	t.Parallel()
	reg := testkit.StartRegistry(t, columnsRegistrySeeds, "", "")
	compiled, err := registry.NewCached("value", map[int]sr.Schema{
		pbV1ID: columnsRegistrySeeds[2].Schema, pbV2ID: columnsRegistrySeeds[3].Schema,
	})
	if err != nil {
		t.Fatal(err)
	}
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	const n = 500
	want := 0
	testkit.Produce(t, cl, "events", n, func(i int) *kgo.Record {
		switch {
		case i == 120:
			return &kgo.Record{Partition: 0, Value: wireColumnsJSON(jsV2ID, `{"id": "not a number"}`)}
		case i == 420:
			return &kgo.Record{Partition: 1, Value: wireColumnsProto(t, compiled, pbV2ID, 2, `{"name": "root", "children": [{"name": "leaf"}]}`)}
		}
		want++
		switch {
		case i == 30: // a property the schema does not declare: written without it, and counted
			return &kgo.Record{Partition: 0, Value: wireColumnsJSON(jsV1ID, strings.Replace(columnsEvent(i, false), "{", `{"extra": 1, `, 1))}
		case i < 100:
			return &kgo.Record{Partition: 0, Value: wireColumnsJSON(jsV1ID, columnsEvent(i, false))}
		case i < 200:
			return &kgo.Record{Partition: 0, Value: wireColumnsJSON(jsV2ID, columnsEvent(i, true))}
		case i < 250:
			return &kgo.Record{Partition: 0, Value: wireColumnsJSON(jsV1ID, columnsEvent(i, false))}
		case i < 400:
			return &kgo.Record{Partition: 1, Value: wireColumnsProto(t, compiled, pbV1ID, 0, columnsEvent(i, false))}
		}
		return &kgo.Record{Partition: 1, Value: wireColumnsProto(t, compiled, pbV2ID, 0, columnsEvent(i, true))}
	})
	end := testkit.EndOffsets(t, cl, "events")

	for _, typ := range []string{"parquet", "avro"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			cfg := registryConfig(cluster, dir, reg.URL(), typ, "registry-columns-"+typ)
			cfg.Errors.Tolerance = "all"
			p := drainThenStop(t, cfg, n)
			// After the stop: a record handed to its file is encoded
			// later, on the file's goroutine.
			if r := p.Status().SchemaRegistry; r == nil || r.Undeclared != 1 {
				t.Errorf("status: %+v, want one value with an undeclared property counted", r)
			}
			st := p.Sink()
			if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); !maps.Equal(got, end) {
				t.Errorf("after stop, committed %v, want end offsets %v", got, end)
			}
			if st.Closed["schema"] != 3 || st.Skipped != 2 {
				t.Errorf("closed %v, skipped %d; want 3 rotations of reason schema and 2 records skipped", st.Closed, st.Skipped)
			}
			paths := dataPaths(t, dir)
			// Partition 0: JSON v1, v2, v1; partition 1: Protobuf v1, v2.
			if len(paths) != 5 {
				t.Errorf("%d data files, want 5: %v", len(paths), paths)
			}
			if typ == "parquet" {
				checkParquetColumns(t, paths, want)
			} else {
				checkAvroColumns(t, paths, want)
			}
		})
	}
}

func checkParquetColumns(t *testing.T, paths []string, want int) {
	db := outside.NewDuckDB(t)
	src := "read_parquet(" + sqlList(paths) + ", union_by_name = true)"
	res := db.Query(t,
		"SELECT count(*)::DOUBLE AS n, count(DISTINCT value.id)::DOUBLE AS ids, count(value.score)::DOUBLE AS scored FROM "+src,
		"SELECT DISTINCT typeof(value.id) AS id, typeof(value.at) AS at, typeof(value.user) AS u, typeof(value.note) AS note FROM "+src,
		"SELECT value.id::DOUBLE AS id, epoch_ms(value.at)::DOUBLE AS at, value.user.name AS name, value.user.tags[2] AS tag, value.note AS note, value.score AS score FROM "+src+" WHERE value.id IN (5, 150, 300, 450) ORDER BY 1",
	)
	if got := res[0][0]; fmt.Sprint(got["n"]) != fmt.Sprint(want) || fmt.Sprint(got["ids"]) != fmt.Sprint(want) || fmt.Sprint(got["scored"]) != "198" {
		t.Errorf("counts %v, want %d rows, %d distinct ids, 198 with v2's score", got, want, want)
	}
	if got := res[1]; len(got) != 1 || got[0]["id"] != "BIGINT" || got[0]["at"] != "TIMESTAMP WITH TIME ZONE" || got[0]["u"] != `STRUCT("name" VARCHAR, tags VARCHAR[])` || got[0]["note"] != "VARCHAR" {
		t.Errorf("types %v: want one set, the same for JSON Schema and Protobuf", got)
	}
	rows := res[2]
	if len(rows) != 4 {
		t.Fatalf("rows %v", rows)
	}
	for i, id := range []int{5, 150, 300, 450} {
		r := rows[i]
		note, score := "<nil>", "<nil>"
		if id%5 == 0 {
			note = fmt.Sprintf("n%d", id)
		}
		if (id >= 100 && id < 200) || id >= 400 {
			score = fmt.Sprint(float64(id) / 2)
		}
		got := fmt.Sprintf("%v|%v|%v|%v|%v|%v", r["id"], r["at"], r["name"], r["tag"], r["note"], r["score"])
		if w := fmt.Sprintf("%v|%v|u%v|%v|%v|%v", id, eventT0.UnixMilli()+int64(id), id, id, note, score); got != w {
			t.Errorf("row %d: %s, want %s", i, got, w)
		}
	}
}

func checkAvroColumns(t *testing.T, paths []string, want int) {
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
			u, _ := v["user"].(map[string]any)
			if v["at"] != float64(eventT0.UnixMilli())+id || u["name"] != fmt.Sprintf("u%v", id) {
				t.Fatalf("%s: %v", f.Path, v)
			}
			score, scored := v["score"]
			if v2 := (id >= 100 && id < 200) || id >= 400; scored != v2 || v2 && score != id/2 {
				t.Fatalf("%s: id %v has score %v: a file mixes schemas", f.Path, id, score)
			}
		}
		if !strings.Contains(string(f.Schema), `"timestamp-micros"`) {
			t.Errorf("%s: schema %s has no timestamp-micros", f.Path, f.Schema)
		}
	}
	if n != want || len(ids) != want {
		t.Errorf("%d records, %d distinct ids; want %d", n, len(ids), want)
	}
}
