package format

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/format/jsonscan"
	"github.com/spillway/spillway/internal/registry"
)

// Typed builds the encoders of a sink whose keys or values are in the
// Confluent wire format, typed by the schemas a registry.Registry resolved
// (see docs/design.md, "Schema registry"):
//
//   - avro and parquet files take their columns from the schema (an Avro
//     schema, or one mapped from a Protobuf message or a JSON Schema: see
//     registry.Columns): a file holds records of one schema id (and
//     Protobuf message) per part, and a record of another goes to a new
//     file (Of names them, Fits says whether a record's may join it);
//   - json, jsonl, csv and bytes write each decoded key or value as JSON
//     (Avro by its schema's JSON encoding, JSON Schema values as they are,
//     Protobuf by protojson),
//     whatever its schema, so their files never rotate for a schema.
//
// A part that can't be decoded (no header, an unknown id, data that does
// not match its schema, in avro and parquet a recursive Protobuf message)
// is a record error, for the error policy.
// Encoders only read the registry's cache: the sink's caller resolves every
// id of a batch before the batch is written.
type Typed struct {
	kind Kind
	cfg  Options
	reg  *registry.Registry
}

// NewTyped returns the encoders' builder for cfg, of format kind, with reg.
func NewTyped(kind Kind, cfg Options, reg *registry.Registry) *Typed {
	return &Typed{kind: kind, cfg: cfg, reg: reg}
}

// Config is the format configuration the encoders are built for.
func (t *Typed) Config() Options { return t.cfg }

// Registry is where the encoders read the schemas.
func (t *Typed) Registry() *registry.Registry { return t.reg }

// columnar says whether the format takes its schema from the registry.
func (t *Typed) columnar() bool { return t.kind.NewTyped != nil }

// SchemaIDs are the schemas a typed file is written with: an id per part,
// -1 for none (the part is not decoded, or the file's first record had it
// null or undecodable), and for a Protobuf id the message (the wire format's
// message indexes pick one per record), whose columns differ.
type SchemaIDs struct {
	Key, Value       int
	KeyMsg, ValueMsg string
}

// String is how Of names the schemas: "k<id>[@<message>] v<id>[@<message>]"
// (message full names hold no space or '@').
func (s SchemaIDs) String() string {
	part := func(id int, msg string) string {
		if msg == "" {
			return strconv.Itoa(id)
		}
		return strconv.Itoa(id) + "@" + msg
	}
	return "k" + part(s.Key, s.KeyMsg) + " v" + part(s.Value, s.ValueMsg)
}

func ParseSchemaIDs(s string) SchemaIDs {
	ids := SchemaIDs{Key: -1, Value: -1}
	part := func(p string) (int, string) {
		n, msg, _ := strings.Cut(p, "@")
		id, err := strconv.Atoi(n)
		if err != nil {
			return -1, ""
		}
		return id, msg
	}
	if k, v, ok := strings.Cut(strings.TrimPrefix(s, "k"), " v"); ok {
		ids.Key, ids.KeyMsg = part(k)
		ids.Value, ids.ValueMsg = part(v)
	}
	return ids
}

// Of names the schemas r's file must be written with, or "" when r types
// no file: a text format, or no part r carries has a usable schema (a
// record error or a null then goes to whatever file is open).
func (t *Typed) Of(r *kgo.Record) string {
	if !t.columnar() {
		return ""
	}
	// A part the file does not hold types nothing in it.
	ids := SchemaIDs{Key: -1, Value: -1}
	if t.reg.Keys() && slices.Contains(t.cfg.Fields, "key") {
		ids.Key, ids.KeyMsg = t.usable(r.Key)
	}
	if t.reg.Values() && slices.Contains(t.cfg.Fields, "value") {
		ids.Value, ids.ValueMsg = t.usable(r.Value)
	}
	if ids.Key < 0 && ids.Value < 0 {
		return ""
	}
	return ids.String()
}

// Fits reports whether a record of the schemas of (Of's name for it) may go
// in a file written with the schemas file. A part of the record without a
// usable schema (null, or one the encoder refuses as a record error in any
// file) fits any file: a file's columns are nullable, so a record with a
// null key goes in the file of its value's schema instead of opening one.
// A part with a schema must be of the file's schema for that part.
func (t *Typed) Fits(of, file string) bool {
	if of == "" || of == file {
		return true
	}
	r, f := ParseSchemaIDs(of), ParseSchemaIDs(file)
	return (r.Key < 0 || r.Key == f.Key && r.KeyMsg == f.KeyMsg) &&
		(r.Value < 0 || r.Value == f.Value && r.ValueMsg == f.ValueMsg)
}

// usable is b's schema id, and the name of its columns, if it is cached
// and has columns; else -1.
func (t *Typed) usable(b []byte) (int, string) {
	if b == nil {
		return -1, ""
	}
	id, rest, err := registry.ID(b)
	if err != nil {
		return -1, ""
	}
	s, ok := t.reg.Lookup(id)
	if !ok {
		return -1, ""
	}
	cols, err := s.Columns(rest)
	if err != nil {
		return -1, ""
	}
	return id, cols.Name
}

// NewEncoder builds a file's encoder for the schemas Of named ("" for a
// file of records without any).
func (t *Typed) NewEncoder(w io.Writer, schemas string) (Encoder, error) {
	if t.kind.NewTyped != nil {
		return t.kind.NewTyped(t, ParseSchemaIDs(schemas), w)
	}
	inner, err := t.kind.NewEncoder(t.cfg, w)
	if err != nil {
		return nil, err
	}
	return &jsonDecoding{t: t, inner: inner}, nil
}

// ColumnsOf returns the columns of schema id named msg, or nil for -1 or
// a schema without columns.
func (t *Typed) ColumnsOf(id int, msg string) *registry.Columns {
	if id < 0 {
		return nil
	}
	s, ok := t.reg.Lookup(id)
	if !ok {
		return nil
	}
	cols, err := s.ColumnsNamed(msg)
	if err != nil {
		return nil
	}
	return cols
}

// Payload checks that b (a key or value, not null) is in the wire format
// with a schema id the registry knows, and returns its schema and the data
// after the header.
func (t *Typed) Payload(b []byte, what string, r *kgo.Record) (*registry.Schema, []byte, error) {
	id, rest, err := registry.ID(b)
	if err != nil {
		return nil, nil, PartError(what, r, err)
	}
	s, ok := t.reg.Lookup(id)
	switch {
	case !ok:
		return nil, nil, PartError(what, r, fmt.Errorf("%w: schema id %d was not fetched before the record was written", registry.ErrUndecodable, id))
	case s.Err != nil:
		return nil, nil, PartError(what, r, s.Err)
	}
	return s, rest, nil
}

// Part reads a key or value of a typed file, whose columns for it are
// typed (nil: it has none), and returns the data after the header and the
// value it decodes to (see registry.Columns.Value). Both typed encoders
// take their parts here.
func (t *Typed) Part(b []byte, typed *registry.Columns, id int, what string, r *kgo.Record) (data []byte, v any, err error) {
	s, data, err := t.Payload(b, what, r)
	if err != nil {
		return nil, nil, err
	}
	// Why the part can't be typed at all comes before whether it is of
	// this file's schema: such a part goes in any file (Typed.Fits), and
	// "another schema id" would read as a rotation gone wrong.
	cols, err := s.Columns(data)
	if err != nil {
		return nil, nil, PartError(what, r, err)
	}
	if id >= 0 && s.ID != id {
		return nil, nil, PartError(what, r, fmt.Errorf("%w: schema id %d in a file of schema id %d", registry.ErrUndecodable, s.ID, id))
	}
	if typed == nil {
		return nil, nil, PartError(what, r, fmt.Errorf("%w: schema id %d in a file without it", registry.ErrUndecodable, s.ID))
	}
	if cols != typed {
		return nil, nil, PartError(what, r, fmt.Errorf("%w: message %s of schema id %d in a file of message %s", registry.ErrUndecodable, cols.Name, s.ID, typed.Name))
	}
	v, err = cols.Value(data)
	if err != nil {
		return nil, nil, PartError(what, r, err)
	}
	return data, v, nil
}

// PartError is a record error about a key or value, naming the record.
func PartError(what string, r *kgo.Record, err error) error {
	return fmt.Errorf("%w: %s of %s/%d at offset %d: %w", ErrRecord, what, r.Topic, r.Partition, r.Offset, err)
}

// DecodeAvro decodes data written with s, all of it.
func DecodeAvro(s *registry.Schema, data []byte) (any, error) {
	var v any
	rest, err := s.Avro.Decode(data, &v)
	if err != nil {
		return nil, fmt.Errorf("%w: does not decode with Avro schema id %d: %w", registry.ErrUndecodable, s.ID, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left over after the Avro datum of schema id %d", registry.ErrUndecodable, len(rest), s.ID)
	}
	return v, nil
}

// toJSON decodes a key or value to JSON: Avro by the schema's JSON
// encoding (unions untagged, logical types as their Avro values: a
// timestamp-millis as its milliseconds), JSON Schema data as it is, once it
// is checked to be JSON.
func (t *Typed) toJSON(dst, b []byte, what string, r *kgo.Record) ([]byte, error) {
	s, data, err := t.Payload(b, what, r)
	if err != nil {
		return nil, err
	}
	switch s.Type {
	case sr.TypeAvro:
		v, err := DecodeAvro(s, data)
		if err != nil {
			return nil, PartError(what, r, err)
		}
		out, err := s.Avro.AppendEncodeJSON(dst, v)
		if err != nil {
			return nil, PartError(what, r, fmt.Errorf("%w: %w", registry.ErrUndecodable, err))
		}
		return out, nil
	case sr.TypeJSON, sr.TypeProtobuf:
		out, err := asJSON(dst, s, data)
		if err != nil {
			return nil, PartError(what, r, err)
		}
		return out, nil
	}
	return nil, PartError(what, r, fmt.Errorf("%w: schema id %d has type %s", registry.ErrUndecodable, s.ID, s.Type))
}

// asJSON appends a JSON Schema or Protobuf part, data (after the schema
// id), as JSON: JSON Schema data as it is, once checked to be JSON;
// Protobuf decoded by its message (registry.Schema.ProtoJSON).
func asJSON(dst []byte, s *registry.Schema, data []byte) ([]byte, error) {
	if s.Type == sr.TypeProtobuf {
		return s.ProtoJSON(dst, data)
	}
	ok, multiline := jsonscan.Scan(data)
	if !ok {
		return nil, fmt.Errorf("%w: the data after the header of JSON Schema id %d is not JSON in UTF-8", registry.ErrUndecodable, s.ID)
	}
	if multiline {
		// Pretty-printed: a line break would split a JSON Lines record.
		var c jsonscan.Compactor
		return c.Append(dst, data), nil
	}
	return append(dst, data...), nil
}

// jsonDecoding is a text encoder (json, jsonl, csv, bytes) fed with the
// decoded keys and values as JSON.
type jsonDecoding struct {
	t        *Typed
	inner    Encoder
	key, val []byte // reused
}

func (e *jsonDecoding) Encode(r *kgo.Record) error {
	cp := *r
	var err error
	if e.t.reg.Keys() && r.Key != nil {
		if e.key, err = e.t.toJSON(e.key[:0], r.Key, "key", r); err != nil {
			return err
		}
		cp.Key = e.key
	}
	if e.t.reg.Values() && r.Value != nil {
		if e.val, err = e.t.toJSON(e.val[:0], r.Value, "value", r); err != nil {
			return err
		}
		cp.Value = e.val
	}
	err = e.inner.Encode(&cp)
	if cap(e.key) > MaxRetainedBuffer {
		e.key = nil
	}
	if cap(e.val) > MaxRetainedBuffer {
		e.val = nil
	}
	return err
}

func (e *jsonDecoding) Close() error { return e.inner.Close() }
