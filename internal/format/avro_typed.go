package format

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/registry"
)

// typedAvroEncoder writes an Avro container file whose schema comes from
// the registry (see Typed), in one of two layouts:
//
//   - bare: format.fields [value] with format.envelope false and an Avro
//     value schema: the file's schema is the registered schema itself, and
//     each record is the value's Avro data as it came, after the header
//     (decoded once, to check it). A null value can't be written there and
//     is a record error (errors.null_values: ignore skips tombstones).
//   - envelope: the envelope of format.fields (see envelope), with the key
//     and value fields typed ["null", registered schema] where a registry
//     decodes them; a JSON Schema part stays a string (its JSON).
//
// Blocks, codecs and the sync marker are avroEncoder's.
type typedAvroEncoder struct {
	*avroEncoder
	t        *Typed
	ids      schemaIDs
	key, val *registry.Schema // Avro schemas typing the parts, or nil
	bare     bool
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
	e := &typedAvroEncoder{t: t, ids: ids, key: avroPart(t.schemaOf(ids.key)), val: avroPart(t.schemaOf(ids.value))}
	e.bare = !t.cfg.Envelope && len(env.fields) == 1 && env.fields[0] == fieldValue && e.val != nil
	var schema *avro.Schema
	if e.bare {
		// Root().Schema() inlines the schema's references, which the
		// registered text only names.
		schema, err = e.val.Avro.Root().Schema()
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

// avroPart is s if it is an Avro schema that can type a column.
func avroPart(s *registry.Schema) *registry.Schema {
	if s == nil || s.Err != nil || s.Type != sr.TypeAvro {
		return nil
	}
	return s
}

// typedEnvelopeSchema is the envelope's Avro schema with key and value
// typed by their registered schemas where given.
func typedEnvelopeSchema(env envelope, key, val *registry.Schema) (*avro.Schema, error) {
	base, err := avroSchema(env)
	if err != nil {
		return nil, err
	}
	root := base.Root()
	for i := range root.Fields {
		var s *registry.Schema
		switch root.Fields[i].Name {
		case "key":
			s = key
		case "value":
			s = val
		}
		if s != nil {
			root.Fields[i].Type = nullableNode(s.Avro.Root())
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
		typed   *registry.Schema
		id      int
		what    string
	}{{r.Key, e.t.reg.Keys(), e.key, e.ids.key, "key"}, {r.Value, e.t.reg.Values(), e.val, e.ids.value, "value"}} {
		if !p.decoded || p.b == nil || !e.has(p.what) {
			continue
		}
		data, err := e.part(p.b, p.typed, p.id, p.what, r)
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
// copied as it came, behind the union index of the ["null", schema] field:
// no decode and re-encode, so the bytes, and the order of its maps, are the
// producer's.
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
			case decoded && typed != nil:
				dst = appendUnionData(dst, typed, data)
			case decoded:
				dst, err = fs.AppendEncode(dst, data) // JSON Schema: the JSON
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

// appendUnionData appends data, written with s, as the non-null value of
// the field nullableNode made of s.
func appendUnionData(dst []byte, s *registry.Schema, data []byte) []byte {
	root := s.Avro.Root()
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

// part checks a decoded key or value and returns the data to write: the
// Avro data after the header (decoded once, to check it), or a JSON
// Schema part's JSON.
func (e *typedAvroEncoder) part(b []byte, typed *registry.Schema, id int, what string, r *kgo.Record) ([]byte, error) {
	js, data, _, err := e.t.part(b, typed, id, what, r)
	if js != nil {
		return js, err
	}
	return data, err
}

// part reads a key or value: a JSON Schema or Protobuf part outside a typed
// file as JSON (js), else the Avro data after the header (data), decoded
// once (v) to check it. Both typed encoders take their parts here.
func (t *Typed) part(b []byte, typed *registry.Schema, id int, what string, r *kgo.Record) (js, data []byte, v any, err error) {
	s, data, err := t.payload(b, id, what, r)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.Type != sr.TypeAvro && typed == nil {
		// JSON Schema and Protobuf parts are kept as JSON strings.
		out, err := asJSON(nil, s, data)
		if err != nil {
			return nil, nil, nil, partError(what, r, err)
		}
		return out, nil, nil, nil
	}
	if typed == nil || s.ID != typed.ID {
		return nil, nil, nil, partError(what, r, fmt.Errorf("%w: schema id %d in a file without it", registry.ErrUndecodable, s.ID))
	}
	v, err = decodeAvro(s, data)
	if err != nil {
		return nil, nil, nil, partError(what, r, err)
	}
	return nil, data, v, nil
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

// encodeBare writes the value's own Avro data, once it decodes.
func (e *typedAvroEncoder) encodeBare(r *kgo.Record) error {
	if r.Value == nil {
		return fmt.Errorf("%w: the value of %s/%d at offset %d is null, and the file's schema is the value's registered schema, which has no null; set errors.null_values: ignore to skip tombstones, or format.envelope: true", ErrRecord, r.Topic, r.Partition, r.Offset)
	}
	s, data, err := e.t.payload(r.Value, e.ids.value, "value", r)
	if err != nil {
		return err
	}
	if _, err := decodeAvro(s, data); err != nil {
		return partError("value", r, err)
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
