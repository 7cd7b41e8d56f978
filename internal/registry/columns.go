package registry

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/twmb/avro"
)

// Columns is how a registered schema types the columns of avro and parquet
// files: an Avro schema, the one intermediate form both typed writers take,
// and how a part's data becomes a value of it. For an Avro id it is the
// registered schema itself; Protobuf messages and JSON Schemas are mapped
// onto Avro here (see proto_columns.go, json_columns.go and
// docs/formats.md, "Schema registry"), so that one piece of code writes
// typed rows whatever the schema type.
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

// Columns returns how data (a part of s after the schema id) is typed in
// columns: for Protobuf, the message its indexes pick. An error (wrapping
// ErrUndecodable) says why it can't be: a message that has no fixed
// columns, like a recursive one, names the schema id and the field.
func (s *Schema) Columns(data []byte) (*Columns, error) {
	if s.Err != nil {
		return nil, s.Err
	}
	switch {
	case s.avroCols != nil:
		return s.avroCols, nil
	case s.jsonCols != nil || s.colsErr != nil:
		return s.jsonCols, s.colsErr
	case s.Proto != nil:
		index, _, err := header.DecodeIndex(data, maxProtoIndexes)
		if err != nil {
			return nil, fmt.Errorf("%w: the message indexes after schema id %d: %w", ErrUndecodable, s.ID, err)
		}
		md, err := messageAt(s.Proto, index)
		if err != nil {
			return nil, fmt.Errorf("%w: schema id %d: %w", ErrUndecodable, s.ID, err)
		}
		return s.ColumnsNamed(string(md.FullName()))
	}
	return nil, fmt.Errorf("%w: schema id %d has type %s, which has no columns", ErrUndecodable, s.ID, s.Type)
}

// buildColumns builds the Columns of a parsed schema, once, before it is
// cached: afterwards they are only read.
func (s *Schema) buildColumns() {
	switch {
	case s.Err != nil:
	case s.Avro != nil:
		s.avroCols = &Columns{Schema: s.Avro, Avro: true, value: func(data []byte) (any, error) {
			var v any
			rest, err := s.Avro.Decode(data, &v)
			if err != nil {
				return nil, fmt.Errorf("%w: does not decode with Avro schema id %d: %w", ErrUndecodable, s.ID, err)
			}
			if len(rest) != 0 {
				return nil, fmt.Errorf("%w: %d bytes left over after the Avro datum of schema id %d", ErrUndecodable, len(rest), s.ID)
			}
			return v, nil
		}}
	case s.Proto != nil:
		s.protoCols = protoColumns(s.ID, s.Proto)
	default: // JSON Schema
		s.jsonCols, s.colsErr = jsonColumns(s.ID, s.Text)
	}
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

// ColumnsNamed returns the Columns of s whose Name is name (a Protobuf
// message's full name, "" for Avro and JSON Schema), as Columns returned
// them for a record.
func (s *Schema) ColumnsNamed(name string) (*Columns, error) {
	if s.Err != nil {
		return nil, s.Err
	}
	if s.Proto != nil {
		pc := s.protoCols[name]
		if pc == nil {
			return nil, fmt.Errorf("%w: schema id %d has no message %q", ErrUndecodable, s.ID, name)
		}
		return pc.cols, pc.err
	}
	if name != "" {
		return nil, fmt.Errorf("%w: schema id %d has no message %q", ErrUndecodable, s.ID, name)
	}
	if s.avroCols != nil {
		return s.avroCols, nil
	}
	return s.jsonCols, s.colsErr
}
