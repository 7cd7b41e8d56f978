package parquet

import (
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/registry"

	"github.com/spillway/spillway/internal/format"
)

// typedParquetEncoder writes a Parquet file whose columns come from the
// registry (see Typed). The parts' columns are Avro schemas (registered,
// or mapped from Protobuf and JSON Schema: registry.Columns), which map to
// Parquet as:
//
//	record                    group, fields in schema order
//	["null", T] (either way)  optional T
//	other unions              optional string holding the value as JSON
//	array                     LIST;  map: MAP with string keys
//	boolean, int, long, float, double, string, enum, bytes, fixed: the
//	  matching physical type (string and enum as UTF-8 strings)
//	long marked registry.UnsignedProp  INT64 with the UINT_64 logical type
//	date                      DATE;  time-millis, time-micros: TIME
//	timestamp-millis/micros/nanos        TIMESTAMP(unit, isAdjustedToUTC=true)
//	local-timestamp-millis/micros/nanos  TIMESTAMP(unit, isAdjustedToUTC=false)
//	decimal (bytes or fixed)  DECIMAL(precision, scale) on the same bytes
//	uuid                      string
//
// With format.envelope false and format.fields [value], and an Avro record
// as the value's schema, the record's fields are the file's columns;
// otherwise the envelope's columns are written with key and value typed as
// groups (or leaves) of their schemas where a registry decodes them. A
// recursive schema can't be a Parquet schema, and is refused when the file
// is opened. Rows are shredded here (repetition and definition levels), as
// parquetEncoder does for the envelope.
type typedParquetEncoder struct {
	w    *parquet.GenericWriter[any]
	t    *format.Typed
	ids  format.SchemaIDs
	root *pqNode
	bare bool
	// key and val are the columns of the parts, or nil.
	key, val *registry.Columns
	env      format.Envelope
	row      parquet.Row
	rec      map[string]any
	headers  []any
	base     int64

	err    error
	closed bool
}

type pqKind uint8

const (
	pqLeaf pqKind = iota
	pqGroup
	pqList
	pqMap
)

// pqNode is one node of the Parquet schema with what shredding needs.
type pqNode struct {
	kind     pqKind
	name     string
	optional bool
	def, rep int // levels of a present value of this node (a repeated node: of one item)
	col      int // a leaf's column
	conv     func(v any) (parquet.Value, error)
	fields   []*pqNode // group
	elem     *pqNode   // list item; map value
	mapKey   *pqNode
	leaves   []int // columns under this node, for nulls
}

// pqBuilder numbers leaves in the order parquet-go orders columns: depth
// first, fields in order, and gives every node its Iceberg field id.
type pqBuilder struct {
	col int
	ids fieldIDs
	// micros writes timestamps and times in microseconds
	// (config.Format.Micros).
	micros bool
}

func newTypedParquetEncoder(t *format.Typed, ids format.SchemaIDs, w io.Writer) (format.Encoder, error) {
	env, err := format.NewEnvelope(t.Config())
	if err != nil {
		return nil, err
	}
	codec, err := parquetCodec(t.Config().Compression)
	if err != nil {
		return nil, err
	}
	e := &typedParquetEncoder{t: t, ids: ids, env: env, key: t.ColumnsOf(ids.Key, ids.KeyMsg), val: t.ColumnsOf(ids.Value, ids.ValueMsg), rec: map[string]any{}}
	b := pqBuilder{micros: t.Config().Micros}
	var root parquet.Node
	if e.val != nil && !t.Config().Envelope && len(env.Fields) == 1 && env.Fields[0] == format.FieldValue {
		if vr := e.val.Schema.Root().ExpandReferences(); vr.Type == "record" {
			e.bare = true
			root, e.root, err = b.record(vr, "", 0, 0, 0)
		}
	}
	if !e.bare && err == nil {
		b = pqBuilder{ids: fieldIDs{envelope: true}, micros: t.Config().Micros}
		root, e.root, err = b.envelope(env, e.key, e.val)
	}
	if err != nil {
		return nil, fmt.Errorf("format: parquet schema from the registry: %w", err)
	}
	schema := parquet.NewSchema(format.EnvelopeName, root)
	wcfg, err := parquet.NewWriterConfig(
		schema,
		parquet.Compression(codec),
		parquet.PageBufferSize(parquetPageBytes),
		parquet.DataPageVersion(1),
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
	)
	if err != nil {
		return nil, fmt.Errorf("format: parquet writer: %w", err)
	}
	e.w = parquet.NewGenericWriter[any](w, wcfg)
	return e, nil
}

// maxSchemaDepth bounds nesting; deeper schemas are refused.
const maxSchemaDepth = 64

// envelope builds the envelope's columns (see parquetEncoder), key and
// value typed by key and val where given.
func (b *pqBuilder) envelope(env format.Envelope, key, val *registry.Columns) (parquet.Node, *pqNode, error) {
	root := &pqNode{kind: pqGroup}
	var g orderedGroup
	blob := func(name, path string) (parquet.Node, *pqNode) {
		n := parquet.Leaf(parquet.ByteArrayType)
		if env.Text {
			n = parquet.String()
		}
		p := &pqNode{kind: pqLeaf, name: name, optional: true, def: 1, col: b.next(), conv: bytesValue}
		p.leaves = []int{p.col}
		return envelopeID(parquet.Optional(n), path), p
	}
	for _, f := range env.Fields {
		name := format.FieldNames[f]
		var n parquet.Node
		var p *pqNode
		var err error
		switch f {
		case format.FieldKey, format.FieldValue:
			s := key
			if f == format.FieldValue {
				s = val
			}
			if s == nil {
				n, p = blob(name, name)
				break
			}
			n, p, err = b.node(s.Schema.Root().ExpandReferences(), name, name, true, 0, 0, 0)
		case format.FieldOffset:
			n = envelopeID(parquet.Leaf(parquet.Int64Type), name)
			p = &pqNode{kind: pqLeaf, name: name, col: b.next(), conv: longValue}
			p.leaves = []int{p.col}
		case format.FieldTimestamp:
			n = envelopeID(parquet.TimestampAdjusted(timeUnit(b.micros), true), name)
			p = &pqNode{kind: pqLeaf, name: name, col: b.next(), conv: longValue}
			p.leaves = []int{p.col}
		case format.FieldPartition:
			// Optional, as the untyped envelope's (see parquetEncoder).
			n = envelopeID(parquet.Optional(parquet.Leaf(parquet.Int32Type)), name)
			p = &pqNode{kind: pqLeaf, name: name, optional: true, def: 1, col: b.next(), conv: intValue}
			p.leaves = []int{p.col}
		case format.FieldHeaders:
			// required LIST { repeated list { required element { key; optional value } } }
			hk := &pqNode{kind: pqLeaf, name: "key", def: 1, rep: 1, col: b.next(), conv: bytesValue}
			hkn := envelopeID(parquet.String(), "headers.element.key")
			hvn, hv := blob("value", "headers.element.value")
			hv.def, hv.rep = 2, 1
			elem := &pqNode{kind: pqGroup, name: "element", def: 1, rep: 1, fields: []*pqNode{hk, hv}, leaves: []int{hk.col, hv.col}}
			hk.leaves = []int{hk.col}
			n = envelopeID(parquet.List(envelopeID(orderedGroup{namedNode{Node: hkn, name: "key"}, namedNode{Node: hvn, name: "value"}}, "headers.element")), name)
			p = &pqNode{kind: pqList, name: name, def: 0, rep: 1, elem: elem, leaves: elem.leaves}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		g = append(g, namedNode{Node: n, name: name})
		root.fields = append(root.fields, p)
		root.leaves = append(root.leaves, p.leaves...)
	}
	return g, root, nil
}

func (b *pqBuilder) next() int { b.col++; return b.col - 1 }

// record builds a required group of n's fields (the file's root in the
// bare layout, path ""), at levels def and rep.
func (b *pqBuilder) record(n *avro.SchemaNode, path string, def, rep, depth int) (parquet.Node, *pqNode, error) {
	if depth > maxSchemaDepth {
		return nil, nil, fmt.Errorf("the schema nests deeper than %d levels", maxSchemaDepth)
	}
	p := &pqNode{kind: pqGroup, def: def, rep: rep}
	var g orderedGroup
	for i := range n.Fields {
		f := &n.Fields[i]
		fn, fp, err := b.node(&f.Type, f.Name, joinPath(path, f.Name), false, def, rep, depth+1)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		g = append(g, namedNode{Node: fn, name: f.Name})
		p.fields = append(p.fields, fp)
		p.leaves = append(p.leaves, fp.leaves...)
	}
	if len(g) == 0 {
		return nil, nil, fmt.Errorf("record %s has no fields, which Parquet can't hold", n.Name)
	}
	return g, p, nil
}

// node builds the column(s) of Avro schema n named name, at path (see
// fieldIDs); optional makes it nullable whatever n says. def and rep are
// the parent's levels.
func (b *pqBuilder) node(n *avro.SchemaNode, name, path string, optional bool, def, rep, depth int) (parquet.Node, *pqNode, error) {
	if depth > maxSchemaDepth {
		return nil, nil, fmt.Errorf("the schema nests deeper than %d levels", maxSchemaDepth)
	}
	if n.Type == "union" {
		var other []*avro.SchemaNode
		hasNull := false
		for i := range n.Branches {
			if n.Branches[i].Type == "null" {
				hasNull = true
			} else {
				other = append(other, &n.Branches[i])
			}
		}
		if len(other) == 1 {
			return b.node(other[0], name, path, optional || hasNull, def, rep, depth+1)
		}
		// A union of several types has no Parquet type: the value is
		// kept as JSON.
		return b.leaf(parquet.String(), name, path, true, def, rep, unionJSONValue)
	}
	if optional {
		def++
	}
	wrap := func(pn parquet.Node, p *pqNode, err error) (parquet.Node, *pqNode, error) {
		if err != nil {
			return nil, nil, err
		}
		p.name, p.optional = name, optional
		if optional {
			pn = parquet.Optional(pn)
		}
		if pn, err = b.ids.with(pn, path); err != nil {
			return nil, nil, err
		}
		return pn, p, nil
	}
	switch n.Type {
	case "record", "error":
		return wrap(b.record(n, path, def, rep, depth+1))
	case "array":
		// LIST { repeated group list { element } }
		p := &pqNode{kind: pqList, def: def, rep: rep + 1}
		en, ep, err := b.node(n.Items, "element", joinPath(path, "element"), false, def+1, rep+1, depth+1)
		if err != nil {
			return nil, nil, err
		}
		p.elem, p.leaves = ep, ep.leaves
		return wrap(parquet.List(en), p, nil)
	case "map":
		// MAP { repeated group key_value { required key; value } }
		p := &pqNode{kind: pqMap, def: def, rep: rep + 1}
		kp := &pqNode{kind: pqLeaf, name: "key", def: def + 1, rep: rep + 1, col: b.next(), conv: bytesValue}
		kp.leaves = []int{kp.col}
		kn, err := b.ids.with(parquet.String(), joinPath(path, "key"))
		if err != nil {
			return nil, nil, err
		}
		vn, vp, err := b.node(n.Values, "value", joinPath(path, "value"), false, def+1, rep+1, depth+1)
		if err != nil {
			return nil, nil, err
		}
		p.mapKey, p.elem = kp, vp
		p.leaves = append([]int{kp.col}, vp.leaves...)
		return wrap(parquet.Map(kn, vn), p, nil)
	}
	leaf, conv, err := leafOf(n, b.micros)
	if err != nil {
		return nil, nil, err
	}
	return b.leaf(leaf, name, path, optional, def-boolInt(optional), rep, conv)
}

// leaf builds one column at the parent's levels def and rep.
func (b *pqBuilder) leaf(n parquet.Node, name, path string, optional bool, def, rep int, conv func(any) (parquet.Value, error)) (parquet.Node, *pqNode, error) {
	p := &pqNode{kind: pqLeaf, name: name, optional: optional, def: def + boolInt(optional), rep: rep, col: b.next(), conv: conv}
	p.leaves = []int{p.col}
	if optional {
		n = parquet.Optional(n)
	}
	n, err := b.ids.with(n, path)
	if err != nil {
		return nil, nil, err
	}
	return n, p, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// leafOf maps a primitive Avro schema to its Parquet leaf.
func leafOf(n *avro.SchemaNode, micros bool) (parquet.Node, func(any) (parquet.Value, error), error) {
	switch n.Type {
	case "null":
		return parquet.String(), unionJSONValue, nil
	case "boolean":
		return parquet.Leaf(parquet.BooleanType), boolValue, nil
	case "int":
		switch n.LogicalType {
		case "date":
			return parquet.Date(), dateValue, nil
		case "time-millis":
			if micros {
				return parquet.Time(parquet.Microsecond), timeMicrosValue, nil
			}
			return parquet.Time(parquet.Millisecond), timeMillisValue, nil
		}
		return parquet.Int(32), intValue, nil
	case "long":
		switch n.LogicalType {
		case "timestamp-millis":
			if micros {
				return parquet.TimestampAdjusted(parquet.Microsecond, true), timestampValue(time.Microsecond), nil
			}
			return parquet.TimestampAdjusted(parquet.Millisecond, true), timestampValue(time.Millisecond), nil
		case "timestamp-micros":
			return parquet.TimestampAdjusted(parquet.Microsecond, true), timestampValue(time.Microsecond), nil
		case "timestamp-nanos":
			return parquet.TimestampAdjusted(parquet.Nanosecond, true), timestampValue(time.Nanosecond), nil
		case "local-timestamp-millis":
			if micros {
				return parquet.TimestampAdjusted(parquet.Microsecond, false), timestampValue(time.Microsecond), nil
			}
			return parquet.TimestampAdjusted(parquet.Millisecond, false), timestampValue(time.Millisecond), nil
		case "local-timestamp-micros":
			return parquet.TimestampAdjusted(parquet.Microsecond, false), timestampValue(time.Microsecond), nil
		case "local-timestamp-nanos":
			return parquet.TimestampAdjusted(parquet.Nanosecond, false), timestampValue(time.Nanosecond), nil
		case "time-micros":
			return parquet.Time(parquet.Microsecond), timeMicrosValue, nil
		}
		if n.Props[registry.UnsignedProp] == true {
			return parquet.Uint(64), uint64Value, nil
		}
		return parquet.Int(64), longValue, nil
	case "float":
		return parquet.Leaf(parquet.FloatType), floatValue, nil
	case "double":
		return parquet.Leaf(parquet.DoubleType), doubleValue, nil
	case "string", "enum":
		return parquet.String(), bytesValue, nil
	case "bytes":
		if n.LogicalType == "decimal" && n.Precision > 0 {
			return parquet.Decimal(n.Scale, n.Precision, parquet.ByteArrayType), decimalValue(n.Scale, 0), nil
		}
		return parquet.Leaf(parquet.ByteArrayType), bytesValue, nil
	case "fixed":
		switch {
		case n.LogicalType == "decimal" && n.Precision > 0:
			return parquet.Decimal(n.Scale, n.Precision, parquet.FixedLenByteArrayType(n.Size)), decimalValue(n.Scale, n.Size), nil
		case n.LogicalType == "duration":
			return parquet.String(), unionJSONValue, nil
		}
		return parquet.Leaf(parquet.FixedLenByteArrayType(n.Size)), bytesValue, nil
	}
	return nil, nil, fmt.Errorf("avro type %q can't be a Parquet column here (a recursive schema?)", n.Type)
}

func typeError(want string, v any) error {
	return fmt.Errorf("%w: want %s, got %T", registry.ErrUndecodable, want, v)
}

func boolValue(v any) (parquet.Value, error) {
	if b, ok := v.(bool); ok {
		return parquet.BooleanValue(b), nil
	}
	return parquet.Value{}, typeError("boolean", v)
}

func intValue(v any) (parquet.Value, error) {
	if i, ok := v.(int32); ok {
		return parquet.Int32Value(i), nil
	}
	return parquet.Value{}, typeError("int", v)
}

func longValue(v any) (parquet.Value, error) {
	if i, ok := v.(int64); ok {
		return parquet.Int64Value(i), nil
	}
	return parquet.Value{}, typeError("long", v)
}

func uint64Value(v any) (parquet.Value, error) {
	if u, ok := v.(uint64); ok {
		return parquet.Int64Value(int64(u)), nil // UINT_64 reads the bits back unsigned
	}
	return parquet.Value{}, typeError("uint64", v)
}

func floatValue(v any) (parquet.Value, error) {
	if f, ok := v.(float32); ok {
		return parquet.FloatValue(f), nil
	}
	return parquet.Value{}, typeError("float", v)
}

func doubleValue(v any) (parquet.Value, error) {
	if f, ok := v.(float64); ok {
		return parquet.DoubleValue(f), nil
	}
	return parquet.Value{}, typeError("double", v)
}

func bytesValue(v any) (parquet.Value, error) {
	switch b := v.(type) {
	case []byte:
		return parquet.ByteArrayValue(b), nil
	case string:
		return parquet.ByteArrayValue([]byte(b)), nil
	}
	// A fixed decodes to a byte array.
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return parquet.FixedLenByteArrayValue(b), nil
	}
	return parquet.Value{}, typeError("bytes or string", v)
}

func dateValue(v any) (parquet.Value, error) {
	if t, ok := v.(time.Time); ok {
		return parquet.Int32Value(int32(t.Unix() / 86400)), nil
	}
	return parquet.Value{}, typeError("date", v)
}

func timeMillisValue(v any) (parquet.Value, error) {
	if d, ok := v.(time.Duration); ok {
		return parquet.Int32Value(int32(d.Milliseconds())), nil
	}
	return parquet.Value{}, typeError("time-millis", v)
}

func timeMicrosValue(v any) (parquet.Value, error) {
	if d, ok := v.(time.Duration); ok {
		return parquet.Int64Value(d.Microseconds()), nil
	}
	return parquet.Value{}, typeError("time-micros", v)
}

func timestampValue(unit time.Duration) func(any) (parquet.Value, error) {
	return func(v any) (parquet.Value, error) {
		t, ok := v.(time.Time)
		if !ok {
			return parquet.Value{}, typeError("timestamp", v)
		}
		switch unit {
		case time.Millisecond:
			return parquet.Int64Value(t.UnixMilli()), nil
		case time.Microsecond:
			return parquet.Int64Value(t.UnixMicro()), nil
		}
		return parquet.Int64Value(t.UnixNano()), nil
	}
}

// decimalValue writes a decimal as Avro holds it: the unscaled value's
// big-endian two's complement, size bytes for a fixed (0: as short as it
// goes).
func decimalValue(scale, size int) func(any) (parquet.Value, error) {
	return func(v any) (parquet.Value, error) {
		r, ok := v.(*big.Rat)
		if !ok {
			return parquet.Value{}, typeError("decimal", v)
		}
		n := new(big.Int).Mul(r.Num(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
		n.Quo(n, r.Denom())
		b := twosComplement(n, size)
		if size > 0 {
			return parquet.FixedLenByteArrayValue(b), nil
		}
		return parquet.ByteArrayValue(b), nil
	}
}

func twosComplement(n *big.Int, size int) []byte {
	l := (n.BitLen() + 8) / 8 // one bit of sign
	if size > l {
		l = size
	}
	b := make([]byte, l)
	if n.Sign() >= 0 {
		n.FillBytes(b)
		return b
	}
	// -n = ^(n-1): fill |n|-1 and flip every bit.
	m := new(big.Int).Sub(new(big.Int).Neg(n), big.NewInt(1))
	m.FillBytes(b)
	for i := range b {
		b[i] = ^b[i]
	}
	return b
}

// unionJSONValue keeps a value of a many-typed union as JSON.
func unionJSONValue(v any) (parquet.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return parquet.Value{}, fmt.Errorf("%w: %w", registry.ErrUndecodable, err)
	}
	return parquet.ByteArrayValue(b), nil
}

func (e *typedParquetEncoder) Encode(r *kgo.Record) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return format.ErrClosed
	}
	var v any
	if e.bare {
		if r.Value == nil {
			return fmt.Errorf("%w: the value of %s/%d at offset %d is null, and the file's columns are the value's fields; set errors.null_values: ignore to skip tombstones, or format.envelope: true", format.ErrRecord, r.Topic, r.Partition, r.Offset)
		}
		var err error
		if _, v, err = e.t.Part(r.Value, e.val, e.ids.Value, "value", r); err != nil {
			return err
		}
	} else {
		cp := *r
		if e.t.Registry().Keys() {
			cp.Key = nil
		}
		if e.t.Registry().Values() {
			cp.Value = nil
		}
		if err := e.env.Check(&cp); err != nil {
			return err
		}
		rec, err := e.envelopeValue(r)
		if err != nil {
			return err
		}
		v = rec
	}
	row, err := shred(e.row[:0], e.root, v, 0, 0)
	if err != nil {
		clear(e.rec)
		return format.PartError("value", r, fmt.Errorf("%w: %w", registry.ErrUndecodable, err))
	}
	// Values go to the writer column by column, each column's in order.
	sort.SliceStable(row, func(i, j int) bool { return row[i].Column() < row[j].Column() })
	_, err = e.w.WriteRows([]parquet.Row{row})
	clear(row)
	clear(e.rec)
	clear(e.headers)
	e.headers = e.headers[:0]
	e.row = row[:0]
	if cap(e.row) > 1024 {
		e.row = nil
	}
	if err != nil {
		e.err = fmt.Errorf("format: writing parquet row: %w", err)
		return e.err
	}
	if size := e.w.Size(); size-e.base >= parquetRowGroupBytes {
		if err := e.w.Flush(); err != nil {
			e.err = fmt.Errorf("format: writing parquet row group: %w", err)
			return e.err
		}
		e.base = e.w.Size()
	}
	return nil
}

// envelopeValue is r as the envelope's group value.
func (e *typedParquetEncoder) envelopeValue(r *kgo.Record) (map[string]any, error) {
	m := e.rec
	for _, f := range e.env.Fields {
		switch f {
		case format.FieldKey:
			v, err := e.partValue(r.Key, e.t.Registry().Keys(), e.key, e.ids.Key, "key", r)
			if err != nil {
				return nil, err
			}
			m["key"] = v
		case format.FieldValue:
			v, err := e.partValue(r.Value, e.t.Registry().Values(), e.val, e.ids.Value, "value", r)
			if err != nil {
				return nil, err
			}
			m["value"] = v
		case format.FieldOffset:
			m["offset"] = r.Offset
		case format.FieldTimestamp:
			m["timestamp"] = timestampOf(r.Timestamp, e.t.Config().Micros)
		case format.FieldPartition:
			m["partition"] = r.Partition
		case format.FieldHeaders:
			for _, h := range r.Headers {
				var hv any
				if h.Value != nil {
					hv = h.Value
				}
				e.headers = append(e.headers, map[string]any{"key": h.Key, "value": hv})
			}
			m["headers"] = e.headers
		}
	}
	return m, nil
}

// partValue is the value of a key or value column: see Typed.part.
func (e *typedParquetEncoder) partValue(b []byte, decoded bool, typed *registry.Columns, id int, what string, r *kgo.Record) (any, error) {
	if b == nil {
		return nil, nil
	}
	if !decoded {
		return b, nil
	}
	_, v, err := e.t.Part(b, typed, id, what, r)
	return v, err
}

// shred appends v's values under n, with their levels: r is the
// repetition level of the first value, d the definition level of n's
// parent.
func shred(row parquet.Row, n *pqNode, v any, r, d int) (parquet.Row, error) {
	if n.optional && v == nil {
		return nulls(row, n, r, d), nil
	}
	switch n.kind {
	case pqLeaf:
		if v == nil {
			return nil, fmt.Errorf("%s: null in a required field", n.name)
		}
		pv, err := n.conv(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.name, err)
		}
		return append(row, pv.Level(r, n.def, n.col)), nil
	case pqGroup:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a record, got %T", n.name, v)
		}
		var err error
		for _, f := range n.fields {
			if row, err = shred(row, f, m[f.name], r, n.def); err != nil {
				return nil, err
			}
		}
		return row, nil
	case pqList:
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an array, got %T", n.name, v)
		}
		if len(items) == 0 {
			return nulls(row, n, r, n.def), nil
		}
		var err error
		for i, it := range items {
			rr := r
			if i > 0 {
				rr = n.rep
			}
			if row, err = shred(row, n.elem, it, rr, n.def+1); err != nil {
				return nil, err
			}
		}
		return row, nil
	case pqMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a map, got %T", n.name, v)
		}
		if len(m) == 0 {
			return nulls(row, n, r, n.def), nil
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys) // Go maps have no order; files should
		var err error
		for i, k := range keys {
			rr := r
			if i > 0 {
				rr = n.rep
			}
			if row, err = shred(row, n.mapKey, k, rr, n.def+1); err != nil {
				return nil, err
			}
			if row, err = shred(row, n.elem, m[k], rr, n.def+1); err != nil {
				return nil, err
			}
		}
		return row, nil
	}
	return nil, fmt.Errorf("%s: unknown node", n.name)
}

// nulls appends a null at levels r, d to every column under n.
func nulls(row parquet.Row, n *pqNode, r, d int) parquet.Row {
	for _, c := range n.leaves {
		row = append(row, parquet.NullValue().Level(r, d, c))
	}
	return row
}

// Close writes the last row group and the footer.
func (e *typedParquetEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err != nil {
		return e.err
	}
	if err := e.w.Close(); err != nil {
		e.err = fmt.Errorf("format: finishing parquet file: %w", err)
	}
	return e.err
}
