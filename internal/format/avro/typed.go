package avro

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/registry"

	"github.com/spillway/spillway/internal/format"
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
	t        *format.Typed
	ids      format.SchemaIDs
	key, val *registry.Columns // columns of the parts, or nil
	bare     bool
	// bufs hold the key's and value's Avro data when it is encoded here
	// (not an Avro id), reused.
	bufs [2][]byte
	// fieldSchemas are the envelope's fields' schemas, in order.
	fieldSchemas []*avro.Schema
	headers      []any
}

func newTypedAvroFile(t *format.Typed, ids format.SchemaIDs, w io.Writer) (format.Encoder, error) {
	var sync [16]byte
	if _, err := rand.Read(sync[:]); err != nil {
		return nil, fmt.Errorf("format: avro sync marker: %w", err)
	}
	return newTypedAvroEncoder(t, ids, w, sync)
}

func newTypedAvroEncoder(t *format.Typed, ids format.SchemaIDs, w io.Writer, sync [16]byte) (*typedAvroEncoder, error) {
	env, err := format.NewEnvelope(t.Config())
	if err != nil {
		return nil, err
	}
	e := &typedAvroEncoder{t: t, ids: ids, key: t.ColumnsOf(ids.Key, ids.KeyMsg), val: t.ColumnsOf(ids.Value, ids.ValueMsg)}
	e.bare = !t.Config().Envelope && len(env.Fields) == 1 && env.Fields[0] == format.FieldValue && e.val != nil
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
	codec, err := newAvroCodec(t.Config().Compression)
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
func typedEnvelopeSchema(env format.Envelope, key, val *registry.Columns) (*avro.Schema, error) {
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
		return format.ErrClosed
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
	}{{r.Key, e.t.Registry().Keys(), e.key, e.ids.Key, "key"}, {r.Value, e.t.Registry().Values(), e.val, e.ids.Value, "value"}} {
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
	for _, f := range e.env.Fields {
		if format.FieldNames[f] == name {
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
	for i, f := range e.env.Fields {
		fs := e.fieldSchemas[i]
		switch f {
		case format.FieldKey, format.FieldValue:
			b, data, typed, decoded := r.Key, parts[0], e.key, e.t.Registry().Keys()
			if f == format.FieldValue {
				b, data, typed, decoded = r.Value, parts[1], e.val, e.t.Registry().Values()
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
		case format.FieldOffset:
			dst, err = fs.AppendEncode(dst, r.Offset)
		case format.FieldTimestamp:
			dst, err = fs.AppendEncode(dst, r.Timestamp.UnixMilli())
		case format.FieldPartition:
			dst, err = fs.AppendEncode(dst, r.Partition)
		case format.FieldHeaders:
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
	data, v, err := e.t.Part(b, typed, id, what, r)
	if err != nil || typed.Avro {
		return data, err
	}
	out, err := typed.Schema.AppendEncode(e.bufs[i][:0], v)
	if err != nil {
		return nil, format.PartError(what, r, fmt.Errorf("%w: does not fit its columns: %w", registry.ErrUndecodable, err))
	}
	e.bufs[i] = out
	if cap(out) > format.MaxRetainedBuffer {
		e.bufs[i] = nil
	}
	return out, nil
}

// checkRaw applies the envelope's checks to the parts written as bytes.
func (e *typedAvroEncoder) checkRaw(r *kgo.Record) error {
	cp := *r
	if e.t.Registry().Keys() {
		cp.Key = nil
	}
	if e.t.Registry().Values() {
		cp.Value = nil
	}
	return e.env.Check(&cp)
}

// encodeBare writes the value's Avro data, once it decodes.
func (e *typedAvroEncoder) encodeBare(r *kgo.Record) error {
	if r.Value == nil {
		return fmt.Errorf("%w: the value of %s/%d at offset %d is null, and the file's schema is the value's registered schema, which has no null; set errors.null_values: ignore to skip tombstones, or format.envelope: true", format.ErrRecord, r.Topic, r.Partition, r.Offset)
	}
	data, err := e.part(1, r.Value, e.val, e.ids.Value, "value", r)
	if err != nil {
		return err
	}
	return e.appendDatum(r, func(dst []byte) ([]byte, error) { return append(dst, data...), nil })
}

// appendDatum adds one encoded record to the open block, as
// avroEncoder.Encode does.
func (e *typedAvroEncoder) appendDatum(r *kgo.Record, enc func(dst []byte) ([]byte, error)) error {
	if e.count > 0 && format.RecordBytes(r) >= avroBlockBytes {
		if err := e.flush(); err != nil {
			return err
		}
	}
	if e.block == nil {
		e.block = make([]byte, 0, avroBlockBytes+avroBlockBytes/4)
	}
	b, err := enc(e.block)
	if err != nil {
		return fmt.Errorf("%w: offset %d does not fit the avro schema: %v", format.ErrRecord, r.Offset, err)
	}
	e.block = b
	e.count++
	if len(e.block) >= avroBlockBytes {
		return e.flush()
	}
	return nil
}
