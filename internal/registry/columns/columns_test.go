package columns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestJSONSchemaColumns maps the JSON Schema forms one at a time: each
// schema is a property "f" of an object, and its Avro field type and the
// value of {"f": data} are checked.
func TestJSONSchemaColumns(t *testing.T) {
	for _, c := range []struct {
		name, schema, avro string
		data               string // the value of f; "" for absent
		want               any
		err                string
	}{
		{"string", `{"type": "string"}`, `["null","string"]`, `"x"`, "x", ""},
		{"required string", `{"type": "string"}` + req, `"string"`, `"x"`, "x", ""},
		{"required, null allowed", `{"type": ["null", "string"]}` + req, `["null","string"]`, `null`, nil, ""},
		{"required and absent", `{"type": "string"}` + req, `"string"`, ``, nil, "$.f: missing, and required"},
		{"integer", `{"type": "integer"}`, `["null","long"]`, `12345678901234`, int64(12345678901234), ""},
		{"integer written 1e3", `{"type": "integer"}`, `["null","long"]`, `1e3`, int64(1000), ""},
		{"integer with a fraction", `{"type": "integer"}`, `["null","long"]`, `1.5`, nil, "1.5 is not an integer"},
		{"integer or number", `{"type": ["integer", "number"]}`, `["null","double"]`, `2`, 2.0, ""},
		{"number", `{"type": "number"}`, `["null","double"]`, `-0.25`, -0.25, ""},
		{"boolean as a string", `{"type": "boolean"}`, `["null","boolean"]`, `"true"`, nil, "$.f: string, and the schema wants boolean"},
		{"date-time", `{"type": "string", "format": "date-time"}`, `["null",{"type":"long","logicalType":"timestamp-micros"}]`,
			`"2024-12-02T14:33:20.5+02:00"`, time.Date(2024, 12, 2, 12, 33, 20, 5e8, time.UTC), ""},
		{"date", `{"type": "string", "format": "date"}`, `["null",{"type":"int","logicalType":"date"}]`, `"2024-12-02"`, time.Date(2024, 12, 2, 0, 0, 0, 0, time.UTC), ""},
		{"enum of strings and null", `{"enum": ["a", "b", null]}`, `["null","string"]`, `"b"`, "b", ""},
		{"enum of numbers", `{"enum": [1, 2]}`, `["null","string"]`, `2`, "2", ""},
		{"anyOf with null", `{"anyOf": [{"type": "integer"}, {"type": "null"}]}` + req, `["null","long"]`, `7`, int64(7), ""},
		{"oneOf of two types", `{"oneOf": [{"type": "integer"}, {"type": "string"}]}`, `["null","string"]`, `"x"`, `"x"`, ""},
		{"allOf of one", `{"allOf": [{"type": "boolean"}]}`, `["null","boolean"]`, `true`, true, ""},
		{"allOf of two", `{"allOf": [{"type": "object"}, {"required": ["a"]}]}`, `["null","string"]`, `{"a": 1}`, `{"a":1}`, ""},
		{"any", `{}`, `["null","string"]`, `[1, {"b": null}]`, `[1,{"b":null}]`, ""},
		{"true", `true`, `["null","string"]`, `"s"`, `"s"`, ""},
		{"tuple", `{"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}}`, `["null","string"]`, `["a", 1]`, `["a",1]`, ""},
		{"array of nullable", `{"type": "array", "items": {"type": ["integer", "null"]}}`, `["null",{"type":"array","items":["null","long"]}]`, `[1, null]`, []any{int64(1), nil}, ""},
		{"map", `{"type": "object", "additionalProperties": {"type": "integer"}}`, `["null",{"type":"map","values":"long"}]`, `{"a": 1}`, map[string]any{"a": int64(1)}, ""},
		{"map of the wrong type", `{"type": "object", "additionalProperties": {"type": "integer"}}`, `["null",{"type":"map","values":"long"}]`, `{"a": "x"}`, nil, "$.f.a: string, and the schema wants integer"},
		{"closed object", `{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}`,
			`["null",{"type":"record","name":"Value_f","fields":[{"name":"a","type":["null","long"],"default":null}]}]`, `{"a": 1, "b": 2}`, nil, `$.f: property "b" is not in the schema`},
		{"names", `{"type": "object", "properties": {"a-b": {"type": "integer"}, "a_b": {"type": "integer"}, "9": {"type": "integer"}}}`,
			`["null",{"type":"record","name":"Value_f","fields":[{"name":"a_b","type":["null","long"],"default":null},{"name":"a_b_2","type":["null","long"],"default":null},{"name":"_9","type":["null","long"],"default":null}]}]`,
			`{"a-b": 1, "a_b": 2}`, map[string]any{"a_b": int64(1), "a_b_2": int64(2), "_9": nil}, ""},
		{"remote $ref", `{"$ref": "https://example.com/s.json"}`, `["null","string"]`, `1`, `1`, ""},
		{"local $ref", `{"$ref": "#/definitions/n"}`, `["null","long"]`, `1`, int64(1), ""},
		{"recursive $ref", `{"$ref": "#/definitions/node"}`,
			`["null",{"type":"record","name":"Value_f","fields":[{"name":"up","type":["null","string"],"default":null},{"name":"v","type":["null","long"],"default":null}]}]`,
			`{"up": {"v": 2}, "v": 1}`, map[string]any{"up": `{"v":2}`, "v": int64(1)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema, required, _ := strings.Cut(c.schema, req)
			text := `{"type": "object", "definitions": {"n": {"type": "integer"},
				"node": {"type": "object", "properties": {"up": {"$ref": "#/definitions/node"}, "v": {"type": "integer"}}}},
				"properties": {"f": ` + schema + `}`
			if required != "" || strings.HasSuffix(c.schema, req) {
				text += `, "required": ["f"]`
			}
			text += `}`
			cols := jsonSchemaColumns(t, text)
			var root struct {
				Fields []struct {
					Type json.RawMessage `json:"type"`
				} `json:"fields"`
			}
			if err := json.Unmarshal([]byte(cols.Schema.String()), &root); err != nil || len(root.Fields) != 1 {
				t.Fatalf("%v: %s", err, cols.Schema)
			}
			var got, want any
			_ = json.Unmarshal(root.Fields[0].Type, &got)
			if err := json.Unmarshal([]byte(c.avro), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("type\n got %s\nwant %s", root.Fields[0].Type, c.avro)
			}
			data := `{}`
			if c.data != "" {
				data = `{"f": ` + c.data + `}`
			}
			v, err := cols.Value([]byte(data))
			if c.err != "" {
				if !errors.Is(err, ErrUndecodable) || !strings.Contains(err.Error(), c.err) {
					t.Errorf("value: %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.(map[string]any)["f"]; !reflect.DeepEqual(got, c.want) {
				t.Errorf("value %#v, want %#v", got, c.want)
			}
			// The value encodes with its schema.
			if _, err := cols.Schema.Encode(v); err != nil {
				t.Errorf("encode: %v", err)
			}
		})
	}
}

// req marks a case whose property is required.
const req = "+required"

// TestProtoColumnsWellKnown: Struct and field-less messages are kept as
// their protojson, integer map keys become strings, an enum number the
// schema does not name is written as its digits, a bytes wrapper is
// nullable bytes.
func TestProtoColumnsWellKnown(t *testing.T) {
	const text = `syntax = "proto3";
import "google/protobuf/struct.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/wrappers.proto";
enum E { ZERO = 0; ONE = 1; }
message M {
  google.protobuf.Struct doc = 1;
  google.protobuf.Empty nothing = 2;
  map<int32, string> names = 3;
  E e = 4;
  google.protobuf.BytesValue raw = 5;
  repeated google.protobuf.UInt32Value counts = 6;
}`
	fd := compileProto(t, text)
	m := Protobuf(1, fd)["M"]
	if m == nil || m.Err != nil {
		t.Fatalf("message M: %+v", m)
	}
	cols := m.Columns
	var got, want any
	_ = json.Unmarshal([]byte(cols.Schema.String()), &got)
	_ = json.Unmarshal([]byte(`{"type":"record","name":"M","fields":[
		{"name":"doc","type":["null","string"],"default":null},
		{"name":"nothing","type":["null","string"],"default":null},
		{"name":"names","type":{"type":"map","values":"string"}},
		{"name":"e","type":"string"},
		{"name":"raw","type":["null","bytes"],"default":null},
		{"name":"counts","type":{"type":"array","items":"long"}}]}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("columns %s", cols.Schema)
	}
	msg := dynamicpb.NewMessage(fd.Messages().ByName("M"))
	if err := protojson.Unmarshal([]byte(`{"doc": {"a": [1]}, "nothing": {}, "names": {"7": "x"}, "e": 5, "counts": [3]}`), msg); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	data := append([]byte{0}, b...) // message index [0]
	v, err := cols.Value(data)
	if err != nil {
		t.Fatal(err)
	}
	wantV := map[string]any{"doc": `{"a":[1]}`, "nothing": "{}", "names": map[string]any{"7": "x"}, "e": "5", "raw": nil, "counts": []any{int64(3)}}
	if !reflect.DeepEqual(v, wantV) {
		t.Errorf("value %#v\nwant %#v", v, wantV)
	}
	if _, err := cols.Schema.Encode(v); err != nil {
		t.Errorf("encode: %v", err)
	}
}

// TestColumnsBounded: schemas whose columns double at each level (a type
// used twice in each of a chain of types) are refused (Protobuf) or cut to
// JSON strings (JSON Schema) past a bound, instead of filling the memory.
func TestColumnsBounded(t *testing.T) {
	const bound = 100 // maxColumnsFields, made small
	var pb, js strings.Builder
	pb.WriteString(`syntax = "proto3"; message L0 { int64 v = 1; }` + "\n")
	js.WriteString(`{"$ref": "#/$defs/l8", "$defs": {"l0": {"type": "integer"}`)
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&pb, "message L%d { L%d a = 1; L%d b = 2; }\n", i, i-1, i-1)
		fmt.Fprintf(&js, `, "l%d": {"type": "object", "properties": {"a": {"$ref": "#/$defs/l%d"}, "b": {"$ref": "#/$defs/l%d"}}}`, i, i-1, i-1)
	}
	js.WriteString(`}}`)
	md := compileProto(t, pb.String()).Messages()
	if pc := protoMessageColumns(1, md.ByName("L8"), bound); pc.Err == nil || !strings.Contains(pc.Err.Error(), "expands to more than 100 fields") {
		t.Errorf("L8: %v", pc.Err)
	}
	if pc := protoMessageColumns(1, md.ByName("L4"), bound); pc.Err != nil {
		t.Errorf("L4: %v", pc.Err)
	}
	cols, err := jsonColumnsBounded(2, js.String(), bound)
	if err != nil {
		t.Fatal(err)
	}
	if sch := cols.Schema.String(); !strings.Contains(sch, `"string"`) || strings.Count(sch, `"record"`) > bound {
		t.Errorf("JSON Schema was not cut: %.300s", sch)
	}
	if all, err := jsonColumnsBounded(2, js.String(), maxColumnsFields); err != nil || strings.Contains(all.Schema.String(), `"string"`) {
		t.Errorf("JSON Schema within the bound was cut: %v", err)
	}
}

// TestJSONSchemaUndeclaredCounted: properties a value has that its schema
// does not declare can't be columns. They are left out, as Kafka
// Connect's JSON Schema converter does, but not silently: each such value
// is counted (and so in Registry.Stats and a metric), and the first is
// heard with its path, once per schema.
func TestJSONSchemaUndeclaredCounted(t *testing.T) {
	const schema = `{"type": "object", "properties": {
  "a": {"type": "integer"},
  "n": {"type": "object", "properties": {"x": {"type": "integer"}}},
  "list": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}}`
	var heard []string
	cols, err := JSONSchema(1, schema, func(path string) { heard = append(heard, path) })
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		data  string
		count int64
	}{
		{`{"a": 1, "n": {"x": 2}, "list": [{"k": "v"}]}`, 0},
		{`{"a": 1}`, 0},         // absent properties are nulls, not undeclared
		{`{"a": 1, "a": 2}`, 0}, // a declared property given twice
		{`{"a": 1, "n": {"x": 2, "y": 3}}`, 1},
		{`{"a": 1, "b": true, "c": null}`, 2},
		{`{"list": [{"k": "v"}, {"k": "w", "z": 1}]}`, 3},
	} {
		v, err := cols.Value([]byte(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.data, err)
		}
		if _, err := cols.Schema.Encode(v); err != nil {
			t.Errorf("%s: the value does not encode: %v", c.data, err)
		}
		if got := cols.Undeclared(); got != c.count {
			t.Errorf("after %s: %d values counted, want %d", c.data, got, c.count)
		}
	}
	if want := []string{"$.n.y"}; !reflect.DeepEqual(heard, want) {
		t.Errorf("heard %q, want the first path only, once", heard)
	}

	// additionalProperties: false still makes them a record error.
	closed := strings.Replace(schema, `"properties": {
  "a"`, `"additionalProperties": false, "properties": {
  "a"`, 1)
	cols2 := jsonSchemaColumns(t, closed)
	if _, err := cols2.Value([]byte(`{"a": 1, "b": 2}`)); err == nil || !strings.Contains(err.Error(), `property "b" is not in the schema`) {
		t.Errorf("closed schema: %v, want a record error naming b", err)
	}
	if cols2.Undeclared() != 0 {
		t.Errorf("a refused value was counted")
	}
}

// jsonSchemaColumns is the columns of text as the JSON Schema of id 1.
func jsonSchemaColumns(t *testing.T, text string) *Columns {
	t.Helper()
	cols, err := JSONSchema(1, text, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// compileProto compiles text, with Google's standard imports, as
// registry compiles a registered .proto.
func compileProto(t *testing.T, text string) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"t.proto": text}),
	})}
	files, err := c.Compile(context.Background(), "t.proto")
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}
