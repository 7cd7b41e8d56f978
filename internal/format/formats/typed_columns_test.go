package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// The typed-columns tests register Protobuf and JSON Schema values in the
// fakesr registry process, fetch them with registry.New, and check that
// avro and parquet files hold them as typed columns.
const (
	pbCommonID = 30 // shop.Customer, imported by pbOrderID
	pbOrderID  = 31 // shop.Order (index 0) and the recursive shop.Tree (index 1)
	jsOrderID  = 32
	jsTreeID   = 33 // recursive through $ref "#"
	jsAnyID    = 34 // {"type": "object"}: no columns, one JSON string
)

const pbCommon = `syntax = "proto3";
package shop;
import "google/protobuf/wrappers.proto";
message Customer { string name = 1; google.protobuf.StringValue email = 2; }`

const pbOrder = `syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Item { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  sint32 delta = 2;
  uint32 small = 3;
  uint64 big = 4;
  float ratio = 5;
  double score = 6;
  bool paid = 7;
  string note = 8;
  bytes blob = 9;
  Status status = 10;
  Customer customer = 11;
  repeated Item items = 12;
  map<string, int64> attrs = 13;
  optional string coupon = 14;
  oneof payment { string card = 15; int64 voucher = 16; }
  google.protobuf.Timestamp placed = 17;
  google.protobuf.Int64Value max_qty = 18;
  repeated string tags = 19;
}
message Tree { string name = 1; repeated Tree children = 2; }`

const jsOrder = `{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Order", "type": "object",
 "properties": {
  "id": {"type": "integer"},
  "customer": {"$ref": "#/$defs/customer"},
  "placed": {"type": "string", "format": "date-time"},
  "day": {"type": "string", "format": "date"},
  "items": {"type": "array", "items": {"type": "object",
    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["sku", "qty"]}},
  "attrs": {"type": "object", "additionalProperties": {"type": "string"}},
  "status": {"enum": ["NEW", "PAID"]},
  "score": {"type": ["number", "null"]},
  "paid": {"type": "boolean"},
  "extra": {},
  "mixed": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
  "first-name": {"type": "string"}
 },
 "required": ["id", "customer", "placed", "items", "paid"],
 "$defs": {"customer": {"type": "object",
   "properties": {"name": {"type": "string"}, "email": {"type": ["string", "null"]}}, "required": ["name"]}}}`

const jsTree = `{"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}, "required": ["name"]}`

var columnsSeeds = []sr.SubjectSchema{
	{Subject: "common.proto", Version: 1, ID: pbCommonID, Schema: sr.Schema{Type: sr.TypeProtobuf, Schema: pbCommon}},
	{Subject: "pb-orders-value", Version: 1, ID: pbOrderID, Schema: sr.Schema{Type: sr.TypeProtobuf, Schema: pbOrder,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common.proto", Version: 1}}}},
	{Subject: "js-orders-value", Version: 1, ID: jsOrderID, Schema: sr.Schema{Type: sr.TypeJSON, Schema: jsOrder}},
	{Subject: "js-trees-value", Version: 1, ID: jsTreeID, Schema: sr.Schema{Type: sr.TypeJSON, Schema: jsTree}},
	{Subject: "js-any-value", Version: 1, ID: jsAnyID, Schema: sr.Schema{Type: sr.TypeJSON, Schema: `{"type": "object"}`}},
}

// columnsRegistry starts fakesr with columnsSeeds and returns a client
// that has resolved them.
func columnsRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	srv := testkit.StartRegistry(t, columnsSeeds, "", "")
	reg, err := registry.New(registry.Options{URL: srv.URL(), Decode: "value"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, id := range []int{pbOrderID, jsOrderID, jsTreeID, jsAnyID} {
		recs = append(recs, &kgo.Record{Value: wireJSON(id, "")})
	}
	if err := reg.Resolve(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{pbOrderID, jsOrderID, jsTreeID, jsAnyID} {
		if s, ok := reg.Lookup(id); !ok || s.Err != nil {
			t.Fatalf("schema id %d: %+v", id, s)
		}
	}
	return reg
}

// pbValue is the message at index idx of pbOrderID, given as protojson,
// in the wire format.
func pbValue(t testing.TB, reg *registry.Registry, idx int, js string) []byte {
	t.Helper()
	s, _ := reg.Lookup(pbOrderID)
	m := dynamicpb.NewMessage(s.Proto.Messages().Get(idx))
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatal(err)
	}
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, pbOrderID, []int{idx})
	return append(b, data...)
}

func pbOrders(t testing.TB, reg *registry.Registry) []*kgo.Record {
	t.Helper()
	vals := []string{
		`{"id": "1", "delta": -2, "small": 4000000000, "big": "9007199254740993", "ratio": 0.5, "score": 4.25, "paid": true,
		  "note": "hé", "blob": "AAEC", "status": "PAID", "customer": {"name": "Ada", "email": "ada@example.com"},
		  "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}], "attrs": {"x": "10"}, "coupon": "SAVE",
		  "card": "visa", "placed": "2024-12-02T14:33:20.123456789Z", "max_qty": "100", "tags": ["a", "b"]}`,
		`{"id": "2", "voucher": "5", "customer": {"name": "Bob"}}`,
	}
	var recs []*kgo.Record
	for i, v := range vals {
		recs = append(recs, &kgo.Record{Topic: "pb", Offset: int64(i), Timestamp: typedTS, Value: pbValue(t, reg, 0, v)})
	}
	return recs
}

func jsOrders() []*kgo.Record {
	vals := []string{
		`{"id": 1, "customer": {"name": "Ada", "email": "ada@example.com"}, "placed": "2024-12-02T14:33:20.123456Z", "day": "2024-12-02",
		  "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}], "attrs": {"color": "red"}, "status": "PAID", "score": 4.5,
		  "paid": true, "extra": {"a": [1, 2.50]}, "mixed": 7, "first-name": "Ada", "not-in-schema": 1}`,
		`{"id": 2.0, "customer": {"name": "Bob", "email": null}, "placed": "2024-12-02T15:33:21+01:00", "items": [], "paid": false, "score": null}`,
	}
	var recs []*kgo.Record
	for i, v := range vals {
		recs = append(recs, &kgo.Record{Topic: "js", Offset: int64(i), Timestamp: typedTS, Value: wireJSON(jsOrderID, v)})
	}
	return recs
}

// TestColumnsSchemas pins the Avro schemas Protobuf and JSON Schema map to.
func TestColumnsSchemas(t *testing.T) {
	reg := columnsRegistry(t)
	cols := func(id int, data []byte) string {
		t.Helper()
		s, _ := reg.Lookup(id)
		c, err := s.Columns(data)
		if err != nil {
			t.Fatalf("id %d: %v", id, err)
		}
		return c.Schema.String()
	}
	same := func(what, got, want string) {
		t.Helper()
		var g, w any
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s columns:\n got %s\nwant %s", what, got, want)
		}
	}
	same("protobuf", cols(pbOrderID, pbValue(t, reg, 0, `{}`)[5:]), `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"id","type":"long"},{"name":"delta","type":"int"},{"name":"small","type":"long"},
		{"name":"big","type":{"type":"long","spillway.unsigned":true}},
		{"name":"ratio","type":"float"},{"name":"score","type":"double"},{"name":"paid","type":"boolean"},
		{"name":"note","type":"string"},{"name":"blob","type":"bytes"},{"name":"status","type":"string"},
		{"name":"customer","type":["null",{"type":"record","name":"Customer","fields":[
			{"name":"name","type":"string"},{"name":"email","type":["null","string"],"default":null}]}],"default":null},
		{"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","namespace":"shop.Order","fields":[
			{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
		{"name":"attrs","type":{"type":"map","values":"long"}},
		{"name":"coupon","type":["null","string"],"default":null},
		{"name":"card","type":["null","string"],"default":null},
		{"name":"voucher","type":["null","long"],"default":null},
		{"name":"placed","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
		{"name":"max_qty","type":["null","long"],"default":null},
		{"name":"tags","type":{"type":"array","items":"string"}}]}`)
	same("JSON Schema", cols(jsOrderID, nil), `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},
		{"name":"customer","type":{"type":"record","name":"Order_customer","fields":[
			{"name":"name","type":"string"},{"name":"email","type":["null","string"],"default":null}]}},
		{"name":"placed","type":{"type":"long","logicalType":"timestamp-micros"}},
		{"name":"day","type":["null",{"type":"int","logicalType":"date"}],"default":null},
		{"name":"items","type":{"type":"array","items":{"type":"record","name":"Order_items_item","fields":[
			{"name":"sku","type":"string"},{"name":"qty","type":"long"}]}}},
		{"name":"attrs","type":["null",{"type":"map","values":"string"}],"default":null},
		{"name":"status","type":["null","string"],"default":null},
		{"name":"score","type":["null","double"],"default":null},
		{"name":"paid","type":"boolean"},
		{"name":"extra","type":["null","string"],"default":null},
		{"name":"mixed","type":["null","string"],"default":null},
		{"name":"first_name","type":["null","string"],"default":null}]}`)
	same("recursive JSON Schema", cols(jsTreeID, nil), `{"type":"record","name":"Value","fields":[
		{"name":"name","type":"string"},
		{"name":"children","type":["null",{"type":"array","items":["null","string"]}],"default":null}]}`)
	if got := cols(jsAnyID, nil); got != `["null","string"]` {
		t.Errorf(`{"type": "object"}: %s`, got)
	}
	// The recursive message has no columns, and says where it recurs.
	s, _ := reg.Lookup(pbOrderID)
	_, err := s.Columns(pbValue(t, reg, 1, `{}`)[5:])
	if !errors.Is(err, registry.ErrUndecodable) || !strings.Contains(err.Error(), "schema id 31: message shop.Tree has no fixed columns") ||
		!strings.Contains(err.Error(), "field shop.Tree.children: message shop.Tree contains itself") {
		t.Errorf("recursive message: %v", err)
	}
}

// TestColumnsParquetDuckDBReads: DuckDB reads Protobuf and JSON Schema
// values from parquet with their types and exact values.
func TestColumnsParquetDuckDBReads(t *testing.T) {
	reg := columnsRegistry(t)
	db := outside.NewDuckDB(t)
	dir := t.TempDir()
	bare := typedFormat("parquet", false, "value")
	pbPath := writeTemp(t, dir, "pb.parquet", encodeTyped(t, NewTyped(bare, reg), pbOrders(t, reg)))
	jsPath := writeTemp(t, dir, "js.parquet", encodeTyped(t, NewTyped(bare, reg), jsOrders()))
	jsEnvPath := writeTemp(t, dir, "js-env.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", true, "offset", "value"), reg), jsOrders()))
	// uint64 beyond int64 is exact in parquet (UINT_64).
	maxPath := writeTemp(t, dir, "max.parquet", encodeTyped(t, NewTyped(bare, reg), []*kgo.Record{{Value: pbValue(t, reg, 0, `{"big": "18446744073709551615"}`)}}))
	// What has no column type is a JSON string: the whole value of
	// {"type": "object"}, the children of a recursive schema.
	anyPath := writeTemp(t, dir, "any.parquet", encodeTyped(t, NewTyped(bare, reg), []*kgo.Record{
		{Value: wireJSON(jsAnyID, `{"a": [1, {"b": null}]}`)}, {Value: wireJSON(jsAnyID, `"not even an object"`)}}))
	treePath := writeTemp(t, dir, "tree.parquet", encodeTyped(t, NewTyped(bare, reg), []*kgo.Record{
		{Value: wireJSON(jsTreeID, `{"name": "root", "children": [{"name": "leaf", "children": []}]}`)}}))
	describe := func(p string) string {
		return "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(" + outside.SQLString(p) + "))"
	}
	res := db.Query(t,
		describe(pbPath),
		`SELECT id::VARCHAR AS id, delta, small::VARCHAR AS small, big::VARCHAR AS big, ratio::DOUBLE AS ratio, score, paid, note, hex(blob) AS blob, status,
		  customer.name AS name, customer.email AS email, len(items)::DOUBLE AS n, items[2].sku AS sku2, items[2].qty AS qty2,
		  attrs['x']::VARCHAR AS x, coupon, card, voucher::VARCHAR AS voucher, epoch_us(placed)::VARCHAR AS placed, max_qty::VARCHAR AS max_qty,
		  tags::VARCHAR AS tags FROM read_parquet(`+outside.SQLString(pbPath)+`) ORDER BY id`,
		describe(jsPath),
		`SELECT id::VARCHAR AS id, customer.name AS name, customer.email AS email, epoch_us(placed)::VARCHAR AS placed, day::VARCHAR AS day,
		  len(items)::DOUBLE AS n, items[1].sku AS sku, items[1].qty::VARCHAR AS qty, attrs['color'] AS color, status, score, paid,
		  extra, mixed, first_name FROM read_parquet(`+outside.SQLString(jsPath)+`) ORDER BY id`,
		`SELECT typeof(value) AS vt, value.customer.name AS name FROM read_parquet(`+outside.SQLString(jsEnvPath)+`) ORDER BY "offset"`,
		`SELECT big::VARCHAR AS big, typeof(big) AS t FROM read_parquet(`+outside.SQLString(maxPath)+`)`,
		`SELECT value, typeof(value) AS t FROM read_parquet(`+outside.SQLString(anyPath)+`)`,
		`SELECT name, children::VARCHAR AS children, typeof(children) AS t FROM read_parquet(`+outside.SQLString(treePath)+`)`,
	)
	types := func(rows []outside.Row) map[string]string {
		m := map[string]string{}
		for _, r := range rows {
			m[fmt.Sprint(r["column_name"])] = fmt.Sprint(r["column_type"])
		}
		return m
	}
	wantPB := map[string]string{
		"id": "BIGINT", "delta": "INTEGER", "small": "BIGINT", "big": "UBIGINT", "ratio": "FLOAT", "score": "DOUBLE",
		"paid": "BOOLEAN", "note": "VARCHAR", "blob": "BLOB", "status": "VARCHAR",
		"customer": `STRUCT("name" VARCHAR, email VARCHAR)`, "items": "STRUCT(sku VARCHAR, qty INTEGER)[]",
		"attrs": "MAP(VARCHAR, BIGINT)", "coupon": "VARCHAR", "card": "VARCHAR", "voucher": "BIGINT",
		"placed": "TIMESTAMP WITH TIME ZONE", "max_qty": "BIGINT", "tags": "VARCHAR[]",
	}
	if got := types(res[0]); !reflect.DeepEqual(got, wantPB) {
		t.Errorf("DESCRIBE of the protobuf file:\n got %v\nwant %v", got, wantPB)
	}
	checkTypedRows(t, "protobuf", res[1], []string{
		`{"id":"1","delta":-2,"small":"4000000000","big":"9007199254740993","ratio":0.5,"score":4.25,"paid":true,"note":"hé","blob":"000102","status":"PAID",
		  "name":"Ada","email":"ada@example.com","n":2,"sku2":"B-2","qty2":1,"x":"10","coupon":"SAVE","card":"visa","voucher":null,
		  "placed":"1733150000123456","max_qty":"100","tags":"[a, b]"}`,
		`{"id":"2","delta":0,"small":"0","big":"0","ratio":0,"score":0,"paid":false,"note":"","blob":"","status":"NEW",
		  "name":"Bob","email":null,"n":0,"sku2":null,"qty2":null,"x":null,"coupon":null,"card":null,"voucher":"5",
		  "placed":null,"max_qty":null,"tags":"[]"}`,
	})
	wantJS := map[string]string{
		"id": "BIGINT", "customer": `STRUCT("name" VARCHAR, email VARCHAR)`, "placed": "TIMESTAMP WITH TIME ZONE", "day": "DATE",
		"items": "STRUCT(sku VARCHAR, qty BIGINT)[]", "attrs": "MAP(VARCHAR, VARCHAR)", "status": "VARCHAR", "score": "DOUBLE",
		"paid": "BOOLEAN", "extra": "VARCHAR", "mixed": "VARCHAR", "first_name": "VARCHAR",
	}
	if got := types(res[2]); !reflect.DeepEqual(got, wantJS) {
		t.Errorf("DESCRIBE of the JSON Schema file:\n got %v\nwant %v", got, wantJS)
	}
	checkTypedRows(t, "JSON Schema", res[3], []string{
		`{"id":"1","name":"Ada","email":"ada@example.com","placed":"1733150000123456","day":"2024-12-02","n":2,"sku":"A-1","qty":"2",
		  "color":"red","status":"PAID","score":4.5,"paid":true,"extra":"{\"a\":[1,2.50]}","mixed":"7","first_name":"Ada"}`,
		`{"id":"2","name":"Bob","email":null,"placed":"1733150001000000","day":null,"n":0,"sku":null,"qty":null,
		  "color":null,"status":null,"score":null,"paid":false,"extra":null,"mixed":null,"first_name":null}`,
	})
	if got := res[4]; len(got) != 2 || !strings.HasPrefix(fmt.Sprint(got[0]["vt"]), "STRUCT(id BIGINT, customer STRUCT(") || got[1]["name"] != "Bob" {
		t.Errorf("JSON Schema envelope file: %v", got)
	}
	if got := res[5]; len(got) != 1 || got[0]["big"] != "18446744073709551615" || got[0]["t"] != "UBIGINT" {
		t.Errorf("max uint64: %v", got)
	}
	checkTypedRows(t, "untypeable JSON Schema", res[6], []string{
		`{"value":"{\"a\":[1,{\"b\":null}]}","t":"VARCHAR"}`,
		`{"value":"\"not even an object\"","t":"VARCHAR"}`,
	})
	checkTypedRows(t, "recursive JSON Schema", res[7], []string{
		`{"name":"root","children":"['{\"name\":\"leaf\",\"children\":[]}']","t":"VARCHAR[]"}`,
	})
}

// TestColumnsAvroPythonReads: python3-avro reads Protobuf and JSON Schema
// values from avro files, bare and in the envelope, with their types.
func TestColumnsAvroPythonReads(t *testing.T) {
	reg := columnsRegistry(t)
	dir := t.TempDir()
	bare := typedFormat("avro", false, "value")
	env := typedFormat("avro", true, "offset", "value")
	paths := []string{
		writeTemp(t, dir, "pb.avro", encodeTyped(t, NewTyped(bare, reg), pbOrders(t, reg))),
		writeTemp(t, dir, "pb-env.avro", encodeTyped(t, NewTyped(env, reg), pbOrders(t, reg))),
		writeTemp(t, dir, "js.avro", encodeTyped(t, NewTyped(bare, reg), jsOrders())),
		writeTemp(t, dir, "js-env.avro", encodeTyped(t, NewTyped(env, reg), jsOrders())),
	}
	files := outside.ReadAvroPython(t, paths...)
	wantPB := []string{
		`{"id":1,"delta":-2,"small":4000000000,"big":9007199254740993,"ratio":0.5,"score":4.25,"paid":true,"note":"hé","blob":{"b64":"AAEC"},"status":"PAID",
		  "customer":{"name":"Ada","email":"ada@example.com"},"items":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1}],"attrs":{"x":10},
		  "coupon":"SAVE","card":"visa","voucher":null,"placed":1733150000123,"max_qty":100,"tags":["a","b"]}`,
		`{"id":2,"delta":0,"small":0,"big":0,"ratio":0,"score":0,"paid":false,"note":"","blob":{"b64":""},"status":"NEW",
		  "customer":{"name":"Bob","email":null},"items":[],"attrs":{},"coupon":null,"card":null,"voucher":5,"placed":null,"max_qty":null,"tags":[]}`,
	}
	wantJS := []string{
		`{"id":1,"customer":{"name":"Ada","email":"ada@example.com"},"placed":1733150000123,"day":"2024-12-02",
		  "items":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1}],"attrs":{"color":"red"},"status":"PAID","score":4.5,
		  "paid":true,"extra":"{\"a\":[1,2.50]}","mixed":"7","first_name":"Ada"}`,
		`{"id":2,"customer":{"name":"Bob","email":null},"placed":1733150001000,"day":null,"items":[],"attrs":null,
		  "status":null,"score":null,"paid":false,"extra":null,"mixed":null,"first_name":null}`,
	}
	for fi, want := range [][]string{wantPB, wantPB, wantJS, wantJS} {
		f := files[fi]
		if len(f.Records) != len(want) {
			t.Fatalf("%s: %d records, want %d", f.Path, len(f.Records), len(want))
		}
		for i, w := range want {
			var wv any
			if err := json.Unmarshal([]byte(w), &wv); err != nil {
				t.Fatal(err)
			}
			got := jsonNorm(t, f.Records[i])
			if fi%2 == 1 {
				wv = map[string]any{"offset": float64(i), "value": wv}
			}
			if !reflect.DeepEqual(got, wv) {
				t.Errorf("%s record %d:\n got %v\nwant %v", f.Path, i, got, wv)
			}
		}
	}
	if ty := files[0].Types; ty["placed"] != "datetime" || ty["customer"] != "dict" || ty["blob"] != "bytes" || ty["big"] != "int" || ty["items"] != "list" {
		t.Errorf("python types of the protobuf file: %v", ty)
	}
	if ty := files[2].Types; ty["placed"] != "datetime" || ty["day"] != "date" || ty["id"] != "int" || ty["score"] != "float" {
		t.Errorf("python types of the JSON Schema file: %v", ty)
	}
	var schema map[string]any
	if err := json.Unmarshal(files[0].Schema, &schema); err != nil || schema["name"] != "Order" || schema["namespace"] != "shop" {
		t.Errorf("protobuf file's schema: %s", files[0].Schema)
	}
}

// TestColumnsRecordErrors: values that do not fit their columns are record
// errors naming the record and the cause, and leave nothing in the file.
func TestColumnsRecordErrors(t *testing.T) {
	reg := columnsRegistry(t)
	rec := func(off int64, v []byte) *kgo.Record {
		return &kgo.Record{Topic: "t", Partition: 2, Offset: off, Value: v}
	}
	cases := []struct {
		name  string
		good  []*kgo.Record
		bad   *kgo.Record
		types []string
		want  string
	}{
		{"recursive message", pbOrders(t, reg), rec(40, pbValue(t, reg, 1, `{"name": "root", "children": [{"name": "leaf"}]}`)), []string{"avro", "parquet"},
			"value of t/2 at offset 40: not decodable with the schema registry: schema id 31: message shop.Tree has no fixed columns for avro and parquet: field shop.Tree.children: message shop.Tree contains itself"},
		{"uint64 beyond a long in avro", pbOrders(t, reg), rec(41, pbValue(t, reg, 0, `{"big": "18446744073709551615"}`)), []string{"avro"},
			"value of t/2 at offset 41: not decodable with the schema registry: does not fit its columns"},
		{"wrong JSON type", jsOrders(), rec(42, wireJSON(jsOrderID, `{"id": "x", "customer": {"name": "C"}, "placed": "2024-12-02T00:00:00Z", "items": [], "paid": true}`)), []string{"avro", "parquet"},
			"value of t/2 at offset 42: not decodable with the schema registry: does not fit JSON Schema id 32: $.id: string, and the schema wants integer"},
		{"missing required", jsOrders(), rec(43, wireJSON(jsOrderID, `{"id": 3, "placed": "2024-12-02T00:00:00Z", "items": [], "paid": true}`)), []string{"avro", "parquet"},
			"$.customer: missing, and required"},
		{"bad date-time", jsOrders(), rec(44, wireJSON(jsOrderID, `{"id": 3, "customer": {"name": "C"}, "placed": "yesterday", "items": [], "paid": true}`)), []string{"avro", "parquet"},
			`$.placed: "yesterday" is not a date-time (RFC 3339)`},
		{"not JSON", jsOrders(), rec(45, wireJSON(jsOrderID, `{"id": `)), []string{"avro", "parquet"},
			"the data after the header of JSON Schema id 32 is not JSON"},
	}
	for _, c := range cases {
		for _, typ := range c.types {
			ty := NewTyped(typedFormat(typ, false, "value"), reg)
			var buf bytes.Buffer
			enc, err := ty.NewEncoder(&buf, ty.Of(c.good[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Encode(c.good[0]); err != nil {
				t.Fatal(err)
			}
			err = enc.Encode(c.bad)
			if !errors.Is(err, format.ErrRecord) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, %s: %v\nwant format.ErrRecord with %q", c.name, typ, err, c.want)
			}
			for _, r := range c.good[1:] {
				if err := enc.Encode(r); err != nil {
					t.Fatalf("%s, %s: the next record: %v", c.name, typ, err)
				}
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			if typ == "parquet" && !bytes.Equal(buf.Bytes(), encodeTyped(t, ty, c.good)) {
				t.Errorf("%s, %s: the file differs from one without the bad record", c.name, typ)
			}
		}
	}
}

// TestColumnsOfRotates: a Protobuf file is typed by its message, so a
// record of another message, or another schema id, names other schemas
// (the sink then rotates with reason schema); a record whose message has
// no columns names none.
func TestColumnsOfRotates(t *testing.T) {
	reg := columnsRegistry(t)
	ty := NewTyped(typedFormat("parquet", false, "value"), reg)
	order := ty.Of(&kgo.Record{Value: pbValue(t, reg, 0, `{}`)})
	if order != "k-1 v31@shop.Order" {
		t.Errorf("Of(shop.Order) = %q", order)
	}
	if got := ty.Of(&kgo.Record{Value: pbValue(t, reg, 1, `{}`)}); got != "" {
		t.Errorf("Of(shop.Tree) = %q, want \"\": it has no columns", got)
	}
	if got := ty.Of(jsOrders()[0]); got != "k-1 v32" {
		t.Errorf("Of(JSON Schema) = %q", got)
	}
	if ids := format.ParseSchemaIDs(order); ids != (format.SchemaIDs{Key: -1, Value: pbOrderID, ValueMsg: "shop.Order"}) {
		t.Errorf("ParseSchemaIDs(%q) = %+v", order, ids)
	}
}

// TestColumnsGolden pins typed avro and parquet bytes of Protobuf and JSON
// Schema values.
func TestColumnsGolden(t *testing.T) {
	reg := columnsRegistry(t)
	for _, c := range []struct {
		name string
		cfg  config.Format
		recs []*kgo.Record
	}{
		{"typed-proto.avro", typedFormat("avro", false, "value"), pbOrders(t, reg)},
		{"typed-json-envelope.avro", typedFormat("avro", true, "offset", "value"), jsOrders()},
	} {
		ty := NewTyped(c.cfg, reg)
		var buf bytes.Buffer
		enc, err := ty.NewEncoder(&buf, ty.Of(c.recs[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range c.recs {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		formattest.Golden(t, c.name, withSync(buf.Bytes(), fixedSync))
	}
	formattest.Golden(t, "typed-proto.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", false, "value"), reg), pbOrders(t, reg)))
	formattest.Golden(t, "typed-json-envelope.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", true, "offset", "value"), reg), jsOrders()))
}
