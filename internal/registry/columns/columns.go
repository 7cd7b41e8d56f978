// Package columns maps a registered schema onto the columns of avro and
// parquet files: Avro as it is, Protobuf messages and JSON Schemas onto an
// Avro schema, with how each record's data becomes a value of it. It is
// apart from registry, which fetches and caches schemas, because the
// mapping is a job of its own (half of the registry's code) that needs
// nothing of fetching: registry builds Columns here once per schema.
package columns

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
)

// ErrUndecodable is registry.ErrUndecodable, which registry re-exports:
// declared here, below registry, so that the errors of Columns wrap the
// same sentinel the error policy tests for.
var ErrUndecodable = errors.New("not decodable with the schema registry")

// MaxProtoIndexes bounds the message indexes read from a value: nesting
// deeper than this is not a real schema.
const MaxProtoIndexes = 64

// header reads the wire format's message indexes.
var header sr.ConfluentHeader

// Columns is how a registered schema types the columns of avro and parquet
// files: an Avro schema, the one intermediate form both typed writers take,
// and how a part's data becomes a value of it. For an Avro id it is the
// registered schema itself; Protobuf messages and JSON Schemas are mapped
// onto Avro here (see proto.go, json.go and docs/formats.md, "Schema
// registry"), so that one piece of code writes typed rows whatever the
// schema type.
type Columns struct {
	// Schema is the columns' Avro schema.
	Schema *avro.Schema
	// Name tells apart the Columns of one schema id: a Protobuf schema
	// holds several messages, and the wire format's message indexes pick
	// one per record. It is the message's full name, "" for Avro and JSON
	// Schema.
	Name string
	// Avro says the data after the header is Avro written with Schema,
	// which a writer may copy as it is.
	Avro bool

	// value turns the data after the header (message indexes included)
	// into the Go value Schema.Decode would give for it.
	value func(data []byte) (any, error)

	// undeclared counts the values that had properties their JSON Schema
	// does not declare, which no column holds; onUndeclared hears the
	// first (its path), to say so once. JSON Schema only.
	undeclared   atomic.Int64
	onUndeclared func(path string)
}

// Undeclared is how many values had properties their JSON Schema does not
// declare: the typed files hold them without those properties.
func (c *Columns) Undeclared() int64 { return c.undeclared.Load() }

// Value decodes data, a part after the schema id, to the value the Avro
// schema Schema would decode to (map[string]any for a record, []any for an
// array, int32, int64, float32, float64, string, []byte, bool, time.Time
// for timestamps and dates, nil for null), ready for Schema.AppendEncode
// and the parquet writer. Errors wrap ErrUndecodable.
func (c *Columns) Value(data []byte) (any, error) { return c.value(data) }

// Avro is the Columns of an Avro schema: the schema itself, and data
// decoded with it; id names it in errors.
func Avro(id int, sch *avro.Schema) *Columns {
	return &Columns{Schema: sch, Avro: true, value: func(data []byte) (any, error) {
		var v any
		rest, err := sch.Decode(data, &v)
		if err != nil {
			return nil, fmt.Errorf("%w: does not decode with Avro schema id %d: %w", ErrUndecodable, id, err)
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("%w: %d bytes left over after the Avro datum of schema id %d", ErrUndecodable, len(rest), id)
		}
		return v, nil
	}}
}

// avroName makes s a valid Avro name: [A-Za-z_][A-Za-z0-9_]*, any other
// character replaced by '_'.
func avroName(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
		default:
			r = '_'
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// nullable is n as ["null", n], with null first so that the field can
// default to null.
func nullable(n avro.SchemaNode) avro.SchemaNode {
	return avro.SchemaNode{Type: "union", Branches: []avro.SchemaNode{{Type: "null"}, n}}
}

// nullField is a field of type ["null", n] defaulting to null.
func nullField(name string, n avro.SchemaNode) avro.SchemaField {
	return avro.SchemaField{Name: name, Type: nullable(n), Default: nil, HasDefault: true}
}
