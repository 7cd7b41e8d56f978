package format

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/registry"
)

// typedAvroEncoder writes an Avro container file whose schema comes from
// the registry (see Typed), in one of two layouts:
//
//   - bare: format.fields [value] with format.envelope false and a value
//     with columns: the file's schema is the value's columns' schema (the
//     registered Avro schema itself, or the one mapped from a Protobuf
//     message or a JSON Schema), and each record is the value's Avro data:
//     for an Avro id as it came, after the header (decoded once, to check
//     it), else the decoded value encoded with the columns' schema. A null
//     value can't be written there and is a record error
//     (errors.null_values: ignore skips tombstones).
//   - envelope: the envelope of format.fields (see envelope), with the key
//     and value fields typed ["null", columns' schema] where a registry
//     decodes them.
//
// Blocks, codecs and the sync marker are avroEncoder's.
type typedAvroEncoder struct {
	*avroEncoder
	t        *Typed
	ids      schemaIDs
	key, val *registry.Columns // columns of the parts, or nil
	bare     bool
	// bufs hold the key's and value's Avro data when it is encoded here
	// (not an Avro id), reused.
	bufs [2][]byte
	// fieldSchemas are the envelope's fields' schemas, in order.
	fieldSchemas []*avro.Schema
	headers      []any
}

func newTypedAvroFile(t *Typed, ids schemaIDs, w io.Writer) (Encoder, error) {
	var sync [16]byte
	if _, err := rand.Read(sync[:]); err != nil {
		return nil, fmt.Errorf("format: avro sync marker: %w", err)
	}
	return newTypedAvroEncoder(t, ids, w, sync)
}

func newTypedAvroEncoder(t *Typed, ids schemaIDs, w io.Writer, sync [16]byte) (*typedAvroEncoder, error) {
	env, err := newEnvelope(t.cfg)
	if err != nil {
		return nil, err
	}
	e := &typedAvroEncoder{t: t, ids: ids, key: t.columnsOf(ids.key, ids.keyMsg), val: t.columnsOf(ids.value, ids.valueMsg)}
	e.bare = !t.cfg.Envelope && len(env.fields) == 1 && env.fields[0] == fieldValue && e.val != nil
	var schema *avro.Schema
	if e.bare {
		// Root().Schema() inlines the schema's references, which the
		// registered text only names.
		schema, err = e.val.Schema.Root().Schema()
	} else {
		schema, err = typedEnvelopeSchema(env, e.key, e.val)
		if err == nil {
			root := schema.Root()
			for i := range root.Fields {
				var fs *avro.Schema
				if fs, err = root.Fields[i].Type.Schema(); err != nil {
					break
				}
				e.fieldSchemas = append(e.fieldSchemas, fs)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("format: avro schema from the registry: %w", err)
	}
	codec, err := newAvroCodec(t.cfg.Compression)
	if err != nil {
		return nil, err
	}
	e.avroEncoder = &avroEncoder{w: w, schema: schema, env: env, codec: codec, sync: sync}
	if _, err := ocf.NewWriter(w, schema, ocf.WithCodec(codecName(codec.name())), ocf.WithSyncMarker(sync)); err != nil {
		codec.close()
		return nil, fmt.Errorf("format: writing avro header: %w", err)
	}
	return e, nil
}

// typedEnvelopeSchema is the envelope's Avro schema with key and value
// typed by their columns where given.
func typedEnvelopeSchema(env envelope, key, val *registry.Columns) (*avro.Schema, error) {
	base, err := avroSchema(env)
	if err != nil {
		return nil, err
	}
	root := base.Root()
	for i := range root.Fields {
		var s *registry.Columns
		switch root.Fields[i].Name {
		case "key":
			s = key
		case "value":
			s = val
		}
		if s != nil {
			root.Fields[i].Type = nullableNode(s.Schema.Root())
		}
	}
	return root.Schema()
}

// nullableNode is n as a union with null, for a null key or a tombstone.
func nullableNode(n *avro.SchemaNode) avro.SchemaNode {
	if n.Type == "union" {
		for _, b := range n.Branches {
			if b.Type == "null" {
				return *n
			}
		}
		return avro.SchemaNode{Type: "union", Branches: append([]avro.SchemaNode{{Type: "null"}}, n.Branches...)}
	}
	return avro.SchemaNode{Type: "union", Branches: []avro.SchemaNode{{Type: "null"}, *n}}
}

func (e *typedAvroEncoder) Encode(r *kgo.Record) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return errClosed
	}
	if e.bare {
		return e.encodeBare(r)
	}
	if err := e.checkRaw(r); err != nil {
		return err
	}
	// Decode every part first, so a bad record leaves nothing behind.
	var parts [2][]byte // key, value: the Avro data to copy, typed parts only
	for i, p := range [...]struct {
		b       []byte
		decoded bool
		typed   *registry.Columns
		id      int
		what    string
	}{{r.Key, e.t.reg.Keys(), e.key, e.ids.key, "key"}, {r.Value, e.t.reg.Values(), e.val, e.ids.value, "value"}} {
		if !p.decoded || p.b == nil || !e.has(p.what) {
			continue
		}
		data, err := e.part(i, p.b, p.typed, p.id, p.what, r)
		if err != nil {
			return err
		}
		parts[i] = data
	}
	return e.appendDatum(r, func(dst []byte) ([]byte, error) { return e.appendEnvelope(dst, r, parts) })
}

// has reports whether the envelope holds the field named name.
func (e *typedAvroEncoder) has(name string) bool {
	for _, f := range e.env.fields {
		if fieldNames[f] == name {
			return true
		}
	}
	return false
}

// appendEnvelope encodes r field by field. A typed part's Avro data is
// copied behind the union index of the ["null", schema] field: for an Avro
// id as it came (no decode and re-encode, so the bytes, and the order of
// its maps, are the producer's).
func (e *typedAvroEncoder) appendEnvelope(dst []byte, r *kgo.Record, parts [2][]byte) ([]byte, error) {
	var err error
	for i, f := range e.env.fields {
		fs := e.fieldSchemas[i]
		switch f {
		case fieldKey, fieldValue:
			b, data, typed, decoded := r.Key, parts[0], e.key, e.t.reg.Keys()
			if f == fieldValue {
				b, data, typed, decoded = r.Value, parts[1], e.val, e.t.reg.Values()
			}
			switch {
			case b == nil:
				dst, err = fs.AppendEncode(dst, nil)
			case decoded:
				// Encode's part refused a decoded part without columns
				// in this file: typed is set.
				dst = appendUnionData(dst, typed, data)
			default:
				dst, err = fs.AppendEncode(dst, b)
			}
		case fieldOffset:
			dst, err = fs.AppendEncode(dst, r.Offset)
		case fieldTimestamp:
			dst, err = fs.AppendEncode(dst, r.Timestamp.UnixMilli())
		case fieldHeaders:
			for _, h := range r.Headers {
				e.headers = append(e.headers, map[string]any{"key": h.Key, "value": h.Value})
			}
			dst, err = fs.AppendEncode(dst, e.headers)
			clear(e.headers)
			e.headers = e.headers[:0]
		}
		if err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// appendUnionData appends data, written with c's schema, as the non-null
// value of the field nullableNode made of it.
func appendUnionData(dst []byte, c *registry.Columns, data []byte) []byte {
	root := c.Schema.Root()
	if root.Type != "union" {
		return append(append(dst, 2), data...) // branch 1, zigzag
	}
	for _, b := range root.Branches {
		if b.Type == "null" {
			return append(dst, data...) // the field is s's own union
		}
	}
	// null was put first: every branch index is one more.
	idx, n := binary.Varint(data)
	return append(binary.AppendVarint(dst, idx+1), data[n:]...)
}

// part checks a decoded key or value (i: 0 the key, 1 the value) and
// returns its Avro data: after the header for an Avro id (decoded once, to
// check it), else the decoded value encoded with the columns' schema.
func (e *typedAvroEncoder) part(i int, b []byte, typed *registry.Columns, id int, what string, r *kgo.Record) ([]byte, error) {
	data, v, err := e.t.part(b, typed, id, what, r)
	if err != nil || typed.Avro {
		return data, err
	}
	out, err := typed.Schema.AppendEncode(e.bufs[i][:0], v)
	if err != nil {
		return nil, partError(what, r, fmt.Errorf("%w: does not fit its columns: %w", registry.ErrUndecodable, err))
	}
	e.bufs[i] = out
	if cap(out) > maxRetainedBuffer {
		e.bufs[i] = nil
	}
	return out, nil
}

// part reads a key or value of a typed file, whose columns for it are
// typed (nil: it has none), and returns the data after the header and the
// value it decodes to (see registry.Columns.Value). Both typed encoders
// take their parts here.
func (t *Typed) part(b []byte, typed *registry.Columns, id int, what string, r *kgo.Record) (data []byte, v any, err error) {
	s, data, err := t.payload(b, what, r)
	if err != nil {
		return nil, nil, err
	}
	// Why the part can't be typed at all comes before whether it is of
	// this file's schema: such a part goes in any file (Typed.Fits), and
	// "another schema id" would read as a rotation gone wrong.
	cols, err := s.Columns(data)
	if err != nil {
		return nil, nil, partError(what, r, err)
	}
	if id >= 0 && s.ID != id {
		return nil, nil, partError(what, r, fmt.Errorf("%w: schema id %d in a file of schema id %d", registry.ErrUndecodable, s.ID, id))
	}
	if typed == nil {
		return nil, nil, partError(what, r, fmt.Errorf("%w: schema id %d in a file without it", registry.ErrUndecodable, s.ID))
	}
	if cols != typed {
		return nil, nil, partError(what, r, fmt.Errorf("%w: message %s of schema id %d in a file of message %s", registry.ErrUndecodable, cols.Name, s.ID, typed.Name))
	}
	v, err = cols.Value(data)
	if err != nil {
		return nil, nil, partError(what, r, err)
	}
	return data, v, nil
}

// checkRaw applies the envelope's checks to the parts written as bytes.
func (e *typedAvroEncoder) checkRaw(r *kgo.Record) error {
	cp := *r
	if e.t.reg.Keys() {
		cp.Key = nil
	}
	if e.t.reg.Values() {
		cp.Value = nil
	}
	return e.env.check(&cp)
}

// encodeBare writes the value's Avro data, once it decodes.
func (e *typedAvroEncoder) encodeBare(r *kgo.Record) error {
	if r.Value == nil {
		return fmt.Errorf("%w: the value of %s/%d at offset %d is null, and the file's schema is the value's registered schema, which has no null; set errors.null_values: ignore to skip tombstones, or format.envelope: true", ErrRecord, r.Topic, r.Partition, r.Offset)
	}
	data, err := e.part(1, r.Value, e.val, e.ids.value, "value", r)
	if err != nil {
		return err
	}
	return e.appendDatum(r, func(dst []byte) ([]byte, error) { return append(dst, data...), nil })
}

// appendDatum adds one encoded record to the open block, as
// avroEncoder.Encode does.
func (e *typedAvroEncoder) appendDatum(r *kgo.Record, enc func(dst []byte) ([]byte, error)) error {
	if e.count > 0 && recordBytes(r) >= avroBlockBytes {
		if err := e.flush(); err != nil {
			return err
		}
	}
	if e.block == nil {
		e.block = make([]byte, 0, avroBlockBytes+avroBlockBytes/4)
	}
	b, err := enc(e.block)
	if err != nil {
		return fmt.Errorf("%w: offset %d does not fit the avro schema: %v", ErrRecord, r.Offset, err)
	}
	e.block = b
	e.count++
	if len(e.block) >= avroBlockBytes {
		return e.flush()
	}
	return nil
}
