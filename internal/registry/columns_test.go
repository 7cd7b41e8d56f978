package registry

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// TestSchemaColumns: a cached schema hands out the Columns package columns
// built for it: a Protobuf message by the record's message indexes or by
// name, a JSON Schema's one, and the values its JSON Schema columns found
// with undeclared properties counted in Stats.
func TestSchemaColumns(t *testing.T) {
	t.Parallel()
	reg, err := NewCached("value", map[int]sr.Schema{
		1: {Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; message A { int64 a = 1; } message B { string b = 1; }`},
		2: {Type: sr.TypeJSON, Schema: `{"type": "object", "properties": {"a": {"type": "integer"}}}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := reg.Lookup(1)
	cols, err := pb.Columns([]byte{2, 2}) // message indexes [1]: B
	if err != nil || cols.Name != "B" {
		t.Fatalf("Columns(indexes [1]) = %+v, %v; want B", cols, err)
	}
	if named, err := pb.ColumnsNamed("B"); err != nil || named != cols {
		t.Errorf("ColumnsNamed(B) = %p, %v; want the Columns of B, %p", named, err, cols)
	}
	if _, err := pb.ColumnsNamed("C"); !errors.Is(err, ErrUndecodable) {
		t.Errorf("ColumnsNamed(C) = %v, want ErrUndecodable", err)
	}
	if _, err := pb.Columns([]byte{2, 8}); !errors.Is(err, ErrUndecodable) {
		t.Errorf("Columns(indexes [4]) = %v, want ErrUndecodable", err)
	}

	js, _ := reg.Lookup(2)
	jcols, err := js.Columns(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{`{"a": 1}`, `{"a": 1, "b": 2}`, `{"c": true}`} {
		if _, err := jcols.Value([]byte(data)); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
	}
	if got := reg.Stats().Undeclared; got != 2 {
		t.Errorf("Stats().Undeclared = %d, want 2", got)
	}
}
