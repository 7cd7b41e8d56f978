package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// orderSchema covers what the typed writers map: a nested record, a
// nullable field, timestamp-millis, date, an array of records, a map, an
// enum, a decimal, boolean and a nullable double.
const orderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[
   {"name":"name","type":"string"},
   {"name":"email","type":["null","string"],"default":null}]}},
 {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
   {"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
 {"name":"attrs","type":{"type":"map","values":"string"}},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
 {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"paid","type":"boolean"},
 {"name":"score","type":["null","double"]}]}`

const (
	orderID   = 7
	orderV2ID = 8 // another schema, for rotation tests
	jsonID    = 9
	protoID   = 10
)

func typedRegistry(t testing.TB, decode string) *registry.Registry {
	t.Helper()
	reg, err := registry.NewCached(decode, map[int]sr.Schema{
		orderID:   {Type: sr.TypeAvro, Schema: orderSchema},
		orderV2ID: {Type: sr.TypeAvro, Schema: `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"}]}`},
		jsonID:    {Type: sr.TypeJSON, Schema: `{"type":"object"}`},
		protoID: {Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; package t;
import "google/protobuf/timestamp.proto";
message Other { string x = 1; }
message M { int64 a = 1; string s = 2; message N { bool b = 1; } N n = 3; repeated string tags = 4; google.protobuf.Timestamp at = 5; }`},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// wireAvro is v in the Confluent wire format with schema id.
func wireAvro(t testing.TB, id int, schema string, v any) []byte {
	t.Helper()
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, id, nil)
	b, err := avro.MustParse(schema).AppendEncode(b, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wireJSON(id int, doc string) []byte {
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, id, nil)
	return append(b, doc...)
}

var typedTS = time.UnixMilli(1733150000123).UTC()

// orders are two full orders and one with every nullable part null and
// empty collections.
func orders(t testing.TB) []*kgo.Record {
	t.Helper()
	day := time.Date(2024, 12, 2, 0, 0, 0, 0, time.UTC)
	vals := []map[string]any{
		{"id": int64(1), "customer": map[string]any{"name": "Ada", "email": "ada@example.com"}, "placed": typedTS, "day": day,
			"items":  []any{map[string]any{"sku": "A-1", "qty": int32(2)}, map[string]any{"sku": "B-2", "qty": int32(1)}},
			"attrs":  map[string]any{"color": "red"}, // one key: Go would encode more in any order
			"status": "PAID", "total": big.NewRat(123456, 100), "paid": true, "score": 4.5},
		{"id": int64(2), "customer": map[string]any{"name": "Bob", "email": nil}, "placed": typedTS.Add(time.Second), "day": day.AddDate(0, 0, 1),
			"items": []any{}, "attrs": map[string]any{}, "status": "NEW", "total": big.NewRat(-5, 100), "paid": false, "score": nil},
		{"id": int64(3), "customer": map[string]any{"name": "Cy", "email": nil}, "placed": time.UnixMilli(0).UTC(), "day": time.Unix(0, 0).UTC(),
			"items":  []any{map[string]any{"sku": "C-3", "qty": int32(-1)}},
			"attrs":  map[string]any{"x": ""},
			"status": "NEW", "total": big.NewRat(0, 1), "paid": true, "score": -0.25},
	}
	var recs []*kgo.Record
	for i, v := range vals {
		recs = append(recs, &kgo.Record{Topic: "orders", Offset: int64(10 + i), Timestamp: typedTS.Add(time.Duration(i) * time.Millisecond),
			Key: []byte("k" + string(rune('0'+i))), Value: wireAvro(t, orderID, orderSchema, v),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}})
	}
	return recs
}

func typedFormat(typ string, envelope bool, fields ...string) config.Format {
	if len(fields) == 0 {
		fields = formattest.AllFields()
	}
	return config.Format{Type: typ, Compression: "none", Fields: fields, ValueEncoding: "none", Envelope: envelope}
}

// encodeTyped writes recs into one file as the sink would: typed by the
// first record's schemas.
func encodeTyped(t testing.TB, ty *format.Typed, recs []*kgo.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := ty.NewEncoder(&buf, ty.Of(recs[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTypedOfNamesSchemas(t *testing.T) {
	reg := typedRegistry(t, "value")
	ty := NewTyped(typedFormat("parquet", true), reg)
	recs := orders(t)
	if got := ty.Of(recs[0]); got != "k-1 v7" {
		t.Errorf("Of(order) = %q", got)
	}
	for _, r := range []*kgo.Record{
		{Value: nil}, {Value: []byte("no header")}, {Value: wireJSON(99, "{}")},
	} {
		if got := ty.Of(r); got != "" {
			t.Errorf("Of(%q) = %q, want \"\" (fits any file)", r.Value, got)
		}
	}
	if got := NewTyped(typedFormat("avro", true, "key", "offset"), reg).Of(recs[0]); got != "" {
		t.Errorf("Of without the value field = %q, want \"\": the value types nothing in the file", got)
	}
	if got := NewTyped(typedFormat("jsonl", true), reg).Of(recs[0]); got != "" {
		t.Errorf("jsonl Of = %q, want \"\": text files don't rotate on a schema", got)
	}
}

// TestTypedRecordErrors: what can't be decoded is a record error naming
// the record and the cause, and leaves nothing in the file.
func TestTypedRecordErrors(t *testing.T) {
	reg := typedRegistry(t, "value")
	bad := []struct {
		name string
		rec  *kgo.Record
		want string
	}{
		{"no magic byte", &kgo.Record{Topic: "orders", Partition: 3, Offset: 50, Value: []byte(`{"plain":"json"}`)}, "value of orders/3 at offset 50: not decodable with the schema registry: no schema registry header"},
		{"unknown id", &kgo.Record{Topic: "orders", Partition: 3, Offset: 51, Value: wireJSON(99, "x")}, "schema id 99 is not known"},
		{"bad protobuf", &kgo.Record{Topic: "orders", Partition: 3, Offset: 52, Value: wireJSON(protoID, "\x00\x0a\xff")}, "schema id 10"}, // in jsonl: does not decode as t.Other; in a typed file: not of its schema
		{"truncated avro", &kgo.Record{Topic: "orders", Partition: 3, Offset: 53, Value: wireJSON(orderID, "\x02")}, "does not decode with Avro schema id 7"},
	}
	for _, b := range bad {
		// As the sink's caller does: a registry without the id says so.
		if err := reg.Resolve(t.Context(), []*kgo.Record{b.rec}); err != nil {
			t.Fatal(err)
		}
	}
	for _, typ := range []string{"avro", "parquet", "jsonl"} {
		ty := NewTyped(typedFormat(typ, true), reg)
		good := orders(t)
		want := encodeTyped(t, ty, good)
		for _, b := range bad {
			var buf bytes.Buffer
			enc, err := ty.NewEncoder(&buf, ty.Of(good[0]))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range good {
				if i == 1 {
					err := enc.Encode(b.rec)
					if !errors.Is(err, format.ErrRecord) || !bytes.Contains([]byte(err.Error()), []byte(b.want)) {
						t.Errorf("%s, %s: %v, want format.ErrRecord with %q", typ, b.name, err, b.want)
					}
				}
				if err := enc.Encode(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			switch typ {
			case "avro":
				continue // random sync markers: the readers' tests count records
			case "jsonl": // Avro maps come out in any order
				if n, w := bytes.Count(buf.Bytes(), []byte("\n")), bytes.Count(want, []byte("\n")); n != w {
					t.Errorf("%s, %s: %d lines, want %d", typ, b.name, n, w)
				}
				continue
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s, %s: the file differs from one without the bad record", typ, b.name)
			}
		}
	}
}

func TestTypedJSONL(t *testing.T) {
	reg := typedRegistry(t, "value")
	ty := NewTyped(typedFormat("jsonl", true, "offset", "value"), reg)
	recs := orders(t)[:2]
	recs = append(recs, &kgo.Record{Offset: 20, Value: wireJSON(jsonID, `{"doc": [1, 2]}`)}, &kgo.Record{Offset: 21})
	got := strings.Split(strings.TrimSuffix(string(encodeTyped(t, ty, recs)), "\n"), "\n")
	want := strings.Split(`{"offset":10,"value":{"id":1,"customer":{"name":"Ada","email":"ada@example.com"},"placed":1733150000123,"day":20059,"items":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1}],"attrs":{"color":"red"},"status":"PAID","total":"\u0001\u00e2@","paid":true,"score":4.5}}
{"offset":11,"value":{"id":2,"customer":{"name":"Bob","email":null},"placed":1733150001123,"day":20060,"items":[],"attrs":{},"status":"NEW","total":"\u00fb","paid":false,"score":null}}
{"offset":20,"value":{"doc": [1, 2]}}
{"offset":21,"value":null}`, "\n")
	if len(got) != len(want) {
		t.Fatalf("jsonl: %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	// Avro maps have no order: compare as JSON values.
	for i := range want {
		var g, w any
		if err := json.Unmarshal([]byte(got[i]), &g); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, got[i])
		}
		_ = json.Unmarshal([]byte(want[i]), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestTypedGolden pins typed avro (envelope and bare) and parquet bytes
// on fixed input.
func TestTypedGolden(t *testing.T) {
	reg := typedRegistry(t, "value")
	for _, c := range []struct {
		name string
		cfg  config.Format
	}{
		{"typed-envelope.avro", typedFormat("avro", true)},
		{"typed-bare.avro", typedFormat("avro", false, "value")},
	} {
		ty := NewTyped(c.cfg, reg)
		recs := orders(t)
		var buf bytes.Buffer
		enc, err := ty.NewEncoder(&buf, ty.Of(recs[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		formattest.Golden(t, c.name, withSync(buf.Bytes(), fixedSync))
	}
	formattest.Golden(t, "typed-envelope.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", true), reg), orders(t)))
	formattest.Golden(t, "typed-bare.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", false, "value"), reg), orders(t)))
}

func writeTemp(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTypedAvroPythonReads: python3-avro reads the typed files, with the
// registered schema as the value's type (or the file's), and the values
// with their logical types: timestamps, dates and decimals.
func TestTypedAvroPythonReads(t *testing.T) {
	reg := typedRegistry(t, "value")
	dir := t.TempDir()
	envPath := writeTemp(t, dir, "env.avro", encodeTyped(t, NewTyped(typedFormat("avro", true, "key", "value", "timestamp"), reg), orders(t)))
	barePath := writeTemp(t, dir, "bare.avro", encodeTyped(t, NewTyped(typedFormat("avro", false, "value"), reg), orders(t)))
	files := outside.ReadAvroPython(t, envPath, barePath)
	wantOrders := []string{
		`{"id":1,"customer":{"name":"Ada","email":"ada@example.com"},"placed":1733150000123,"day":"2024-12-02","items":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1}],"attrs":{"color":"red"},"status":"PAID","total":{"decimal":"1234.56"},"paid":true,"score":4.5}`,
		`{"id":2,"customer":{"name":"Bob","email":null},"placed":1733150001123,"day":"2024-12-03","items":[],"attrs":{},"status":"NEW","total":{"decimal":"-0.05"},"paid":false,"score":null}`,
		`{"id":3,"customer":{"name":"Cy","email":null},"placed":0,"day":"1970-01-01","items":[{"sku":"C-3","qty":-1}],"attrs":{"x":""},"status":"NEW","total":{"decimal":"0.00"},"paid":true,"score":-0.25}`,
	}
	env, bare := files[0], files[1]
	if len(env.Records) != 3 || len(bare.Records) != 3 {
		t.Fatalf("records: %d and %d, want 3 each", len(env.Records), len(bare.Records))
	}
	for i, w := range wantOrders {
		var want map[string]any
		if err := json.Unmarshal([]byte(w), &want); err != nil {
			t.Fatal(err)
		}
		if got := jsonNorm(t, bare.Records[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("bare record %d:\n got %v\nwant %v", i, got, want)
		}
		got := jsonNorm(t, env.Records[i])
		wantEnv := map[string]any{"key": "k" + string(rune('0'+i)), "value": want, "timestamp": float64(typedTS.UnixMilli() + int64(i))}
		if !reflect.DeepEqual(got, wantEnv) {
			t.Errorf("envelope record %d:\n got %v\nwant %v", i, got, wantEnv)
		}
	}
	if bare.Types["placed"] != "datetime" || bare.Types["day"] != "date" || bare.Types["total"] != "Decimal" || bare.Types["customer"] != "dict" {
		t.Errorf("python types of the bare file: %v", bare.Types)
	}
	var schema map[string]any
	if err := json.Unmarshal(bare.Schema, &schema); err != nil || schema["name"] != "Order" || schema["namespace"] != "shop" {
		t.Errorf("bare file's schema is not the registered one: %s", bare.Schema)
	}
}

// jsonNorm is v through JSON, so numbers compare as float64.
func jsonNorm(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTypedParquetDuckDBReads: DuckDB reads the typed columns with their
// types (nested STRUCT, LIST, MAP, TIMESTAMP, DATE, DECIMAL) and values.
func TestTypedParquetDuckDBReads(t *testing.T) {
	db := outside.NewDuckDB(t)
	reg := typedRegistry(t, "value")
	dir := t.TempDir()
	envPath := writeTemp(t, dir, "env.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", true), reg), orders(t)))
	barePath := writeTemp(t, dir, "bare.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", false, "value"), reg), orders(t)))
	cols := `id, customer.name AS name, customer.email AS email, epoch_ms(placed)::DOUBLE AS placed, day::VARCHAR AS day,
		len(items)::DOUBLE AS n, items[1].sku AS sku, items[1].qty::DOUBLE AS qty, cardinality(attrs)::DOUBLE AS nattrs,
		map_keys(attrs)::VARCHAR AS attr_keys, status, total::VARCHAR AS total, paid, score`
	res := db.Query(t,
		"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet("+outside.SQLString(barePath)+"))",
		"SELECT "+cols+" FROM read_parquet("+outside.SQLString(barePath)+") ORDER BY id",
		"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet("+outside.SQLString(envPath)+"))",
		"SELECT key, \"offset\"::DOUBLE AS \"offset\", value.id AS id, value.customer.name AS name, value.items[2].sku AS sku2, typeof(value) AS vt FROM read_parquet("+outside.SQLString(envPath)+") ORDER BY \"offset\"",
	)
	types := map[string]string{}
	for _, r := range res[0] {
		types[fmt.Sprint(r["column_name"])] = fmt.Sprint(r["column_type"])
	}
	wantTypes := map[string]string{
		"id":       "BIGINT",
		"customer": `STRUCT("name" VARCHAR, email VARCHAR)`,
		"placed":   "TIMESTAMP WITH TIME ZONE",
		"day":      "DATE",
		"items":    `STRUCT(sku VARCHAR, qty INTEGER)[]`,
		"attrs":    "MAP(VARCHAR, VARCHAR)",
		"status":   "VARCHAR",
		"total":    "DECIMAL(9,2)",
		"paid":     "BOOLEAN",
		"score":    "DOUBLE",
	}
	if !reflect.DeepEqual(types, wantTypes) {
		t.Errorf("DESCRIBE of the bare file:\n got %v\nwant %v", types, wantTypes)
	}
	wantRows := []string{
		`{"id":"1","name":"Ada","email":"ada@example.com","placed":1733150000123,"day":"2024-12-02","n":2,"sku":"A-1","qty":2,"nattrs":1,"attr_keys":"[color]","status":"PAID","total":"1234.56","paid":true,"score":4.5}`,
		`{"id":"2","name":"Bob","email":null,"placed":1733150001123,"day":"2024-12-03","n":0,"sku":null,"qty":null,"nattrs":0,"attr_keys":"[]","status":"NEW","total":"-0.05","paid":false,"score":null}`,
		`{"id":"3","name":"Cy","email":null,"placed":0,"day":"1970-01-01","n":1,"sku":"C-3","qty":-1,"nattrs":1,"attr_keys":"[x]","status":"NEW","total":"0.00","paid":true,"score":-0.25}`,
	}
	checkTypedRows(t, "bare", res[1], wantRows)
	if got := res[2]; len(got) != 5 || fmt.Sprint(got[1]["column_type"]) == "VARCHAR" || !strings.HasPrefix(fmt.Sprint(got[1]["column_type"]), "STRUCT(id BIGINT, customer STRUCT(") {
		t.Errorf("DESCRIBE of the envelope file: %v", got)
	}
	for _, r := range res[3] {
		if vt := fmt.Sprint(r["vt"]); !strings.HasPrefix(vt, "STRUCT(id BIGINT, customer STRUCT(") {
			t.Errorf("typeof(value) = %s", vt)
		}
		delete(r, "vt")
	}
	checkTypedRows(t, "envelope", res[3], []string{
		`{"key":"k0","offset":10,"id":"1","name":"Ada","sku2":"B-2"}`,
		`{"key":"k1","offset":11,"id":"2","name":"Bob","sku2":null}`,
		`{"key":"k2","offset":12,"id":"3","name":"Cy","sku2":null}`,
	})
}

func checkTypedRows(t *testing.T, name string, rows []outside.Row, want []string) {
	t.Helper()
	if len(rows) != len(want) {
		t.Fatalf("%s: %d rows, want %d: %v", name, len(rows), len(want), rows)
	}
	for i, w := range want {
		var wv any
		if err := json.Unmarshal([]byte(w), &wv); err != nil {
			t.Fatal(err)
		}
		if got := jsonNorm(t, rows[i]); !reflect.DeepEqual(got, wv) {
			t.Errorf("%s row %d:\n got %v\nwant %v", name, i, got, wv)
		}
	}
}

// wireProto is message index path idx of the protoID schema, with fields
// set by set, in the Confluent wire format.
func wireProto(t testing.TB, reg *registry.Registry, idx []int, set func(m *dynamicpb.Message)) []byte {
	t.Helper()
	s, _ := reg.Lookup(protoID)
	md := s.Proto.Messages().Get(idx[0])
	for _, i := range idx[1:] {
		md = md.Messages().Get(i)
	}
	m := dynamicpb.NewMessage(md)
	set(m)
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, protoID, idx)
	return append(b, data...)
}

// TestTypedProtobuf: Protobuf values, compiled from the registered .proto
// (with a standard import), are written as JSON in jsonl, and as typed
// columns in parquet.
func TestTypedProtobuf(t *testing.T) {
	reg := typedRegistry(t, "value")
	s, _ := reg.Lookup(protoID)
	md := s.Proto.Messages().Get(1)
	fd := func(name string) protoreflect.FieldDescriptor { return md.Fields().ByName(protoreflect.Name(name)) }
	m1 := wireProto(t, reg, []int{1}, func(m *dynamicpb.Message) {
		m.Set(fd("a"), protoreflect.ValueOfInt64(42))
		m.Set(fd("s"), protoreflect.ValueOfString("hé"))
		n := dynamicpb.NewMessage(md.Messages().Get(0))
		n.Set(n.Descriptor().Fields().ByName("b"), protoreflect.ValueOfBool(true))
		m.Set(fd("n"), protoreflect.ValueOfMessage(n))
		l := m.Mutable(fd("tags")).List()
		l.Append(protoreflect.ValueOfString("x"))
		l.Append(protoreflect.ValueOfString("y"))
		ts := m.Mutable(fd("at")).Message()
		ts.Set(ts.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(1733150000))
	})
	other := wireProto(t, reg, []int{0}, func(m *dynamicpb.Message) {
		m.Set(m.Descriptor().Fields().ByName("x"), protoreflect.ValueOfString("o"))
	})
	nested := wireProto(t, reg, []int{1, 0}, func(m *dynamicpb.Message) {})
	recs := []*kgo.Record{{Offset: 1, Value: m1}, {Offset: 2, Value: other}, {Offset: 3, Value: nested}}
	got := string(encodeTyped(t, NewTyped(typedFormat("jsonl", true, "offset", "value"), reg), recs))
	want := `{"offset":1,"value":{"a":"42","s":"hé","n":{"b":true},"tags":["x","y"],"at":"2024-12-02T14:33:20Z"}}
{"offset":2,"value":{"x":"o"}}
{"offset":3,"value":{"b":false}}
`
	var gotLines, wantLines []any
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		var v any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s", err, got)
		}
		gotLines = append(gotLines, v)
	}
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		var v any
		_ = json.Unmarshal([]byte(l), &v)
		wantLines = append(wantLines, v)
	}
	if !reflect.DeepEqual(gotLines, wantLines) {
		t.Errorf("jsonl:\n%s\nwant:\n%s", got, want)
	}

	// In parquet the message's fields are columns (see
	// typed_columns_test.go): a file holds one message.
	db := outside.NewDuckDB(t)
	path := writeTemp(t, t.TempDir(), "p.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", true, "offset", "value"), reg), recs[:1]))
	res := db.Query(t, "SELECT value.n.b AS b, typeof(value) AS vt FROM read_parquet("+outside.SQLString(path)+") ORDER BY \"offset\"")
	if len(res[0]) != 1 || res[0][0]["b"] != true || !strings.HasPrefix(fmt.Sprint(res[0][0]["vt"]), "STRUCT(a BIGINT, s VARCHAR, n STRUCT(b BOOLEAN)") {
		t.Errorf("parquet rows %v", res[0])
	}
}

// TestTypedNullPartsFit: with keys and values decoded, a record with a null
// key, or a tombstone, goes in the open file of its other part's schema
// (the sink asks Fits), and the typed file holds it with that part null.
// Before, each such record named other schemas and closed the file: a
// topic whose keys are sometimes null made a file per change.
func TestTypedNullPartsFit(t *testing.T) {
	const keyID = 11
	keySchema := `{"type":"record","name":"OrderKey","namespace":"shop","fields":[{"name":"id","type":"long"}]}`
	reg, err := registry.NewCached("both", map[int]sr.Schema{
		orderID: {Type: sr.TypeAvro, Schema: orderSchema},
		keyID:   {Type: sr.TypeAvro, Schema: keySchema},
		protoID: {Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; package t; message Other { string x = 1; }`},
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := orders(t)
	for i, r := range recs {
		r.Key = wireAvro(t, keyID, keySchema, map[string]any{"id": int64(i + 1)})
	}
	nullKey := *recs[1]
	nullKey.Key, nullKey.Offset = nil, 20
	tombstone := *recs[2]
	tombstone.Value, tombstone.Offset = nil, 21
	headerless := *recs[0]
	headerless.Key, headerless.Offset = []byte("plain"), 22
	mixed := []*kgo.Record{recs[0], &nullKey, recs[1], &tombstone, recs[2]}

	for _, typ := range []string{"avro", "parquet"} {
		ty := NewTyped(typedFormat(typ, true, "key", "value", "offset"), reg)
		file := ty.Of(recs[0])
		if file != "k11 v7" {
			t.Fatalf("%s: Of(keyed order) = %q, want k11 v7", typ, file)
		}
		for _, c := range []struct {
			name string
			r    *kgo.Record
			want bool
		}{
			{"same schemas", recs[2], true},
			{"null key", &nullKey, true},
			{"tombstone", &tombstone, true},
			{"key without a header (a record error in any file)", &headerless, true},
		} {
			if got := ty.Fits(ty.Of(c.r), file); got != c.want {
				t.Errorf("%s: Fits(%s: %q, %q) = %v, want %v", typ, c.name, ty.Of(c.r), file, got, c.want)
			}
		}
		// A file opened by a null key has no key type: a typed key
		// opens the next file; other values don't fit either.
		if ty.Fits(file, ty.Of(&nullKey)) {
			t.Errorf("%s: a typed key fits the file of a null key (%q)", typ, ty.Of(&nullKey))
		}
		other := *recs[0]
		other.Value = wireAvro(t, keyID, keySchema, map[string]any{"id": int64(9)})
		if ty.Fits(ty.Of(&other), file) {
			t.Errorf("%s: value of schema 11 fits a file of value schema 7", typ)
		}
		if !ty.Fits("", file) {
			t.Errorf("%s: a record with no usable schema must fit any file", typ)
		}

		path := writeTemp(t, t.TempDir(), "mixed."+typ, encodeTyped(t, ty, mixed))
		var got []string
		if typ == "avro" {
			for _, r := range outside.ReadAvroPython(t, path)[0].Records {
				got = append(got, fmt.Sprint(jsonNorm(t, r["offset"]), " ", jsonNorm(t, r["key"]) != nil, " ", jsonNorm(t, r["value"]) != nil))
			}
		} else {
			res := outside.NewDuckDB(t).Query(t, `SELECT "offset"::DOUBLE AS o, key IS NOT NULL AS k, value IS NOT NULL AS v FROM read_parquet(`+outside.SQLString(path)+`, file_row_number = true) ORDER BY file_row_number`)
			for _, r := range res[0] {
				got = append(got, fmt.Sprint(r["o"], " ", r["k"], " ", r["v"]))
			}
		}
		want := []string{"10 true true", "20 false true", "11 true true", "21 true false", "12 true true"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rows (offset, has key, has value) %v, want %v", typ, got, want)
		}

		// A key that can't be typed at all fits the file too, and its
		// record error says why, not that its id is another file's.
		badIndex := *recs[0]
		badIndex.Key, badIndex.Offset = wireJSON(protoID, "\x02\x0a"), 23 // message index [5] of a schema of one message
		if !ty.Fits(ty.Of(&badIndex), file) {
			t.Errorf("%s: a key without columns does not fit", typ)
		}
		enc, err := ty.NewEncoder(io.Discard, file)
		if err != nil {
			t.Fatal(err)
		}
		err = enc.Encode(&badIndex)
		if !errors.Is(err, format.ErrRecord) || !strings.Contains(err.Error(), "message index") || strings.Contains(err.Error(), "in a file of schema id") {
			t.Errorf("%s: %v, want a record error about the message index", typ, err)
		}
		_ = enc.Close()
	}
}
