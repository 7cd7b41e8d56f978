package registry

import (
	"fmt"

	"github.com/spillway/spillway/internal/registry/columns"
)

// Columns is how a registered schema types the columns of avro and parquet
// files (package columns).
type Columns = columns.Columns

// UnsignedProp marks an Avro long that holds a Protobuf uint64 or fixed64
// (columns.UnsignedProp).
const UnsignedProp = columns.UnsignedProp

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
// cached: afterwards they are only read. onUndeclared hears a JSON
// Schema's first undeclared property (columns.JSONSchema).
func (s *Schema) buildColumns(onUndeclared func(path string)) {
	switch {
	case s.Err != nil:
	case s.Avro != nil:
		s.avroCols = columns.Avro(s.ID, s.Avro)
	case s.Proto != nil:
		s.protoCols = columns.Protobuf(s.ID, s.Proto)
	default: // JSON Schema
		s.jsonCols, s.colsErr = columns.JSONSchema(s.ID, s.Text, onUndeclared)
	}
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
		return pc.Columns, pc.Err
	}
	if name != "" {
		return nil, fmt.Errorf("%w: schema id %d has no message %q", ErrUndecodable, s.ID, name)
	}
	if s.avroCols != nil {
		return s.avroCols, nil
	}
	return s.jsonCols, s.colsErr
}
