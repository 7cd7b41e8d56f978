package fieldread

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
	"github.com/spillway/spillway/internal/registry"
)

const (
	fieldOrderV1 = `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},
		{"name":"country","type":["null","string"],"default":null},
		{"name":"user","type":{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}},
		{"name":"created","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"born","type":{"type":"int","logicalType":"date"}}]}`
	// fieldOrderV0 is an older version, without country.
	fieldOrderV0 = `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},
		{"name":"user","type":{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}},
		{"name":"created","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"born","type":{"type":"int","logicalType":"date"}}]}`
	fieldString = `"string"`
)

// wire is v encoded with schema (id sid) in the registry's wire format.
func wire(t *testing.T, sid int, schema string, v any) []byte {
	t.Helper()
	b, err := avro.MustParse(schema).Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	out, err := h.AppendEncode(nil, sid, nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, b...)
}

// The values Reader reads, and the records it refuses as record
// errors (format.ErrRecord, for the error policy), naming why.
func TestFieldReader(t *testing.T) {
	t.Parallel()
	reg, err := registry.NewCached("value", map[int]sr.Schema{
		1: {Type: sr.TypeAvro, Schema: fieldOrderV1},
		2: {Type: sr.TypeAvro, Schema: fieldOrderV0},
		3: {Type: sr.TypeAvro, Schema: fieldString},
	})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := naming.Parse("d={{value_field:path=created,day}}/c={{value_field:path=country}}/u={{value_field:path=user.id,bucket=4}}/b={{value_field:path=born,month}}/{{topic}}-{{partition}}-{{start_offset}}")
	if err != nil {
		t.Fatal(err)
	}
	fr := New(reg, tmpl.FieldPaths())
	created := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	born := time.Date(1990, 1, 2, 0, 0, 0, 0, time.UTC)
	order := map[string]any{"id": int64(7), "country": "FR", "user": map[string]any{"id": int64(42)}, "created": created, "born": born}
	rec := func(v []byte) *kgo.Record { return &kgo.Record{Topic: "t", Partition: 1, Offset: 5, Value: v} }
	want := func(c any) map[string]any {
		return map[string]any{"created": created, "country": c, "user.id": int64(42), "born": partvalue.Date(born.Unix() / 86400)}
	}

	for _, c := range []struct {
		name  string
		value []byte
		want  map[string]any
	}{
		{"v1", wire(t, 1, fieldOrderV1, order), want("FR")},
		// An older version lacks country: null, as Iceberg reads it.
		{"v0 lacks an optional field", wire(t, 2, fieldOrderV0, order), want(nil)},
		{"null value", nil, map[string]any{"created": nil, "country": nil, "user.id": nil, "born": nil}},
	} {
		got, err := fr.Fields(rec(c.value), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i, p := range tmpl.FieldPaths() {
			if g, w := got[i], c.want[p]; g != w {
				t.Errorf("%s: field %s = %#v (%T), want %#v (%T)", c.name, p, g, g, w, w)
			}
		}
		if err := tmpl.CheckFields(got); err != nil {
			t.Errorf("%s: CheckFields: %v", c.name, err)
		}
	}

	for _, c := range []struct {
		name  string
		fr    *Reader
		value []byte
		want  string
	}{
		{"not registry-encoded", fr, []byte("plain text"), "value of t/1 at offset 5"},
		{"unknown schema id", fr, wire(t, 9, fieldOrderV1, order), "schema id 9 was not fetched"},
		{"not a record", fr, wire(t, 3, fieldString, "x"), "the value is a string, not a record"},
		{"path through a non-record", New(reg, []string{"country", "id.x"}), wire(t, 1, fieldOrderV1, order), "field id.x: id is a long, not a record"},
	} {
		_, err := c.fr.Fields(rec(c.value), nil)
		if !errors.Is(err, format.ErrRecord) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a record error containing %q", c.name, err, c.want)
		}
	}

	// A field of a type the template's transform does not take: day of a
	// string is refused by CheckFields, naming the field.
	wrong, err := naming.Parse("d={{value_field:path=country,day}}/{{topic}}-{{partition}}-{{start_offset}}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := New(reg, wrong.FieldPaths()).Fields(rec(wire(t, 1, fieldOrderV1, order)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := wrong.CheckFields(got); err == nil || !strings.Contains(err.Error(), "value field country: is a string, not a date or timestamp") {
		t.Errorf("CheckFields of day(country) = %v; want the field's type refused", err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
