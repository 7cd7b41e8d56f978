package columns

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/avro"
	"github.com/valyala/fastjson"
)

// JSONSchema maps a JSON Schema (a subset of draft-07 and 2020-12) onto
// Avro. The schema is read here in a few dozen lines rather than with a
// validation library: only its shape matters, and values are checked
// against that shape as they are converted.
//
//	type object with properties      record, fields in the schema's order;
//	                                 a property not in required, or whose
//	                                 type allows null, is ["null", T]
//	type object, additionalProperties a schema, no properties
//	                                 map of that schema
//	type array with items a schema   array
//	type string                      string; format date-time: long
//	                                 timestamp-micros; format date: int date
//	type integer                     long;  type number: double
//	type boolean                     boolean
//	type [T, "null"], anyOf/oneOf [T, {type: null}]: T, nullable
//	$ref #/definitions/X, #/$defs/X  the definition it names
//
// Anything else has no column type and is kept as a string holding the
// JSON of the value (null stays null): {} and true, several types, anyOf and
// oneOf of several types, allOf of more than one schema, tuples, an object
// without properties or typed additionalProperties, a $ref that is not
// local, and a $ref to a definition being expanded (a recursive schema).
// Property names that are not Avro names ([A-Za-z_][A-Za-z0-9_]*) have
// other characters replaced by '_' (and a suffix if two collide). Properties
// a value has that the schema does not name are not written, unless the
// schema says additionalProperties: false, which makes them a record error.
// A value of another type than its schema's is a record error.
//
// onUndeclared, when not nil, hears the path of the first property a value
// has that the schema does not declare, so that the caller can say so once;
// Columns.Undeclared counts them all.
func JSONSchema(id int, text string, onUndeclared func(path string)) (*Columns, error) {
	c, err := jsonColumnsBounded(id, text, maxColumnsFields)
	if c != nil {
		c.onUndeclared = onUndeclared
	}
	return c, err
}

// jsonColumnsBounded is JSONSchema without onUndeclared, cutting to JSON strings past maxFields
// nodes.
func jsonColumnsBounded(id int, text string, maxFields int) (*Columns, error) {
	var p fastjson.Parser
	root, err := p.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%w: the JSON Schema of id %d is not JSON: %w", ErrUndecodable, id, err)
	}
	b := jsBuilder{root: root, onPath: map[string]bool{"#": true}, names: map[string]int{}, maxFields: maxFields}
	name := "Value"
	if t := root.GetStringBytes("title"); len(t) > 0 {
		name = string(t)
	}
	n, an := b.node(root, name)
	if n.null {
		an = nullable(an)
	}
	sch, err := an.Schema()
	if err != nil {
		return nil, fmt.Errorf("%w: the JSON Schema of id %d as an Avro schema: %w", ErrUndecodable, id, err)
	}
	c := &Columns{Schema: sch}
	c.value = func(data []byte) (any, error) {
		var p fastjson.Parser
		v, err := p.ParseBytes(data)
		if err != nil {
			return nil, fmt.Errorf("%w: the data after the header of JSON Schema id %d is not JSON: %w", ErrUndecodable, id, err)
		}
		var undeclared string
		out, err := n.value(v, n.null, "$", &undeclared)
		if err != nil {
			return nil, fmt.Errorf("%w: does not fit JSON Schema id %d: %w", ErrUndecodable, id, err)
		}
		if undeclared != "" && c.undeclared.Add(1) == 1 && c.onUndeclared != nil {
			c.onUndeclared(undeclared)
		}
		return out, nil
	}
	return c, nil
}

type jsKind uint8

const (
	jsJSON jsKind = iota // no column type: the value's JSON as a string
	jsString
	jsTimestamp
	jsDate
	jsLong
	jsDouble
	jsBool
	jsArray
	jsMap
	jsRecord
)

var jsKindNames = [...]string{"any JSON", "string", "date-time string", "date string", "integer", "number", "boolean", "array", "object", "object"}

// jsNode is a JSON Schema as it maps to a column, for converting values.
type jsNode struct {
	kind   jsKind
	null   bool    // the schema allows null
	items  *jsNode // array items, map values
	fields []jsField
	closed bool // additionalProperties: false
}

type jsField struct {
	key, name string // the property, and its Avro field name
	node      *jsNode
	nullable  bool // the Avro field is ["null", T]
}

type jsBuilder struct {
	root   *fastjson.Value
	onPath map[string]bool // $refs being expanded
	names  map[string]int  // record names given
	depth  int
	// fields counts the nodes mapped so far, up to maxFields.
	fields, maxFields int
}

// maxJSONSchemaDepth bounds nesting; deeper parts are kept as JSON.
const maxJSONSchemaDepth = 64

var jsonNode = avro.SchemaNode{Type: "string"}

// anyJSON is the node of a schema that maps to no column type: the value
// is kept as JSON text.
func anyJSON() (*jsNode, avro.SchemaNode) { return &jsNode{kind: jsJSON, null: true}, jsonNode }

// node maps schema s to a node and its Avro type (not null: the caller
// makes it nullable). name is the record name to give it, if it is one.
func (b *jsBuilder) node(s *fastjson.Value, name string) (*jsNode, avro.SchemaNode) {
	if b.fields++; s == nil || s.Type() != fastjson.TypeObject || b.depth >= maxJSONSchemaDepth || b.fields > b.maxFields {
		return anyJSON()
	}
	b.depth++
	defer func() { b.depth-- }()
	if n, an, ok := b.composite(s, name); ok {
		return n, an
	}
	types, null := jsTypes(s)
	if len(types) != 1 {
		return anyJSON()
	}
	n := &jsNode{null: null}
	switch types[0] {
	case "array":
		return b.array(s, n, name)
	case "object":
		return b.object(s, n, name)
	}
	return scalar(s, n, types[0])
}

// composite maps a $ref, a oneOf or anyOf of one schema (and null), or an
// allOf of one; ok is false when s is none of them.
func (b *jsBuilder) composite(s *fastjson.Value, name string) (n *jsNode, an avro.SchemaNode, ok bool) {
	if ref := s.Get("$ref"); ref != nil {
		target, key := b.resolve(ref)
		if target == nil || b.onPath[key] {
			n, an = anyJSON()
			return n, an, true
		}
		b.onPath[key] = true
		defer delete(b.onPath, key)
		n, an = b.node(target, name)
		return n, an, true
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		alts := s.GetArray(k)
		if alts == nil {
			continue
		}
		var other []*fastjson.Value
		hasNull := false
		for _, a := range alts {
			if string(a.GetStringBytes("type")) == "null" && a.GetObject().Len() == 1 {
				hasNull = true
			} else {
				other = append(other, a)
			}
		}
		if len(other) != 1 {
			n, an = anyJSON()
			return n, an, true
		}
		n, an = b.node(other[0], name)
		n.null = n.null || hasNull
		return n, an, true
	}
	if all := s.GetArray("allOf"); all != nil {
		if len(all) != 1 {
			n, an = anyJSON()
			return n, an, true
		}
		n, an = b.node(all[0], name)
		return n, an, true
	}
	return nil, avro.SchemaNode{}, false
}

// scalar maps a string, integer, number or boolean schema.
func scalar(s *fastjson.Value, n *jsNode, typ string) (*jsNode, avro.SchemaNode) {
	switch typ {
	case "string":
		switch string(s.GetStringBytes("format")) {
		case "date-time":
			n.kind = jsTimestamp
			return n, avro.SchemaNode{Type: "long", LogicalType: "timestamp-micros"}
		case "date":
			n.kind = jsDate
			return n, avro.SchemaNode{Type: "int", LogicalType: "date"}
		}
		n.kind = jsString
		return n, avro.SchemaNode{Type: "string"}
	case "integer":
		n.kind = jsLong
		return n, avro.SchemaNode{Type: "long"}
	case "number":
		n.kind = jsDouble
		return n, avro.SchemaNode{Type: "double"}
	case "boolean":
		n.kind = jsBool
		return n, avro.SchemaNode{Type: "boolean"}
	}
	return anyJSON()
}

// array maps an array schema of one item schema.
func (b *jsBuilder) array(s *fastjson.Value, n *jsNode, name string) (*jsNode, avro.SchemaNode) {
	items := s.Get("items")
	if items == nil || items.Type() != fastjson.TypeObject || s.Get("prefixItems") != nil {
		return anyJSON()
	}
	n.kind = jsArray
	var an avro.SchemaNode
	n.items, an = b.node(items, name+"_item")
	if n.items.null {
		an = nullable(an)
	}
	return n, avro.SchemaNode{Type: "array", Items: &an}
}

// object maps an object schema: a record of its properties, or a map of
// its additionalProperties when it has none.
func (b *jsBuilder) object(s *fastjson.Value, n *jsNode, name string) (*jsNode, avro.SchemaNode) {
	props := s.GetObject("properties")
	if props == nil || props.Len() == 0 {
		ap := s.Get("additionalProperties")
		if ap == nil || ap.Type() != fastjson.TypeObject || ap.GetObject().Len() == 0 {
			return anyJSON()
		}
		n.kind = jsMap
		var an avro.SchemaNode
		n.items, an = b.node(ap, name+"_value")
		if n.items.null {
			an = nullable(an)
		}
		return n, avro.SchemaNode{Type: "map", Values: &an}
	}
	n.kind = jsRecord
	n.closed = s.Get("additionalProperties") != nil && s.Get("additionalProperties").Type() == fastjson.TypeFalse
	var required []string
	for _, r := range s.GetArray("required") {
		required = append(required, string(r.GetStringBytes()))
	}
	rec := avro.SchemaNode{Type: "record", Name: b.recordName(name)}
	used := map[string]bool{}
	props.Visit(func(key []byte, v *fastjson.Value) {
		f := jsField{key: string(key), name: avroName(string(key))}
		for base, i := f.name, 2; used[f.name]; i++ {
			f.name = base + "_" + strconv.Itoa(i)
		}
		used[f.name] = true
		var an avro.SchemaNode
		f.node, an = b.node(v, rec.Name+"_"+f.name)
		f.nullable = f.node.null || !slices.Contains(required, f.key)
		if f.nullable {
			rec.Fields = append(rec.Fields, nullField(f.name, an))
		} else {
			rec.Fields = append(rec.Fields, avro.SchemaField{Name: f.name, Type: an})
		}
		n.fields = append(n.fields, f)
	})
	return n, rec
}

// jsTypes are the types s allows besides null, and whether it allows null.
func jsTypes(s *fastjson.Value) (types []string, null bool) {
	t := s.Get("type")
	switch {
	case t == nil:
		// No type: what the keywords imply.
		switch {
		case s.Get("properties") != nil || s.Get("additionalProperties") != nil:
			return []string{"object"}, false
		case s.Get("items") != nil:
			return []string{"array"}, false
		}
		var consts []*fastjson.Value
		if c := s.Get("const"); c != nil {
			consts = append(consts, c)
		}
		consts = append(consts, s.GetArray("enum")...)
		if len(consts) == 0 {
			return nil, false
		}
		for _, c := range consts {
			switch c.Type() {
			case fastjson.TypeString:
			case fastjson.TypeNull:
				null = true
			default:
				return nil, false
			}
		}
		return []string{"string"}, null
	case t.Type() == fastjson.TypeString:
		types = []string{string(t.GetStringBytes())}
	case t.Type() == fastjson.TypeArray:
		for _, x := range t.GetArray() {
			types = append(types, string(x.GetStringBytes()))
		}
	}
	if i := slices.Index(types, "null"); i >= 0 {
		types, null = slices.Delete(types, i, i+1), true
	}
	if len(types) == 2 && slices.Contains(types, "integer") && slices.Contains(types, "number") {
		types = []string{"number"}
	}
	return types, null
}

// resolve follows a local $ref (a JSON pointer into the schema itself).
func (b *jsBuilder) resolve(ref *fastjson.Value) (*fastjson.Value, string) {
	r := string(ref.GetStringBytes())
	if r == "#" {
		return b.root, r
	}
	p, ok := strings.CutPrefix(r, "#/")
	if !ok {
		return nil, r
	}
	v := b.root
	for _, seg := range strings.Split(p, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		if v = v.Get(seg); v == nil {
			return nil, r
		}
	}
	return v, r
}

func (b *jsBuilder) recordName(base string) string {
	n := avroName(base)
	b.names[n]++
	if c := b.names[n]; c > 1 {
		n += "_" + strconv.Itoa(c)
	}
	return n
}

// value converts v (nil when absent) by n; nullable says the Avro type
// takes null. undeclared is set to the path of the first property found
// that the schema does not declare (and does not forbid), if it is "".
func (n *jsNode) value(v *fastjson.Value, nullable bool, path string, undeclared *string) (any, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		if nullable {
			return nil, nil
		}
		if v == nil {
			return nil, fmt.Errorf("%s: missing, and required", path)
		}
		return nil, fmt.Errorf("%s: null, and the schema wants %s", path, jsKindNames[n.kind])
	}
	switch n.kind {
	case jsJSON:
		return string(v.MarshalTo(nil)), nil
	case jsString, jsTimestamp, jsDate:
		return n.text(v, path)
	case jsLong:
		return n.long(v, path)
	case jsDouble:
		return n.double(v, path)
	case jsBool:
		switch v.Type() {
		case fastjson.TypeTrue:
			return true, nil
		case fastjson.TypeFalse:
			return false, nil
		}
		return nil, n.wrong(v, path)
	case jsArray:
		return n.array(v, path, undeclared)
	case jsMap:
		return n.mapOf(v, path, undeclared)
	case jsRecord:
		return n.record(v, path, undeclared)
	}
	return nil, fmt.Errorf("%s: no column type", path)
}

// wrong is the error of a value of another JSON type than n's.
func (n *jsNode) wrong(v *fastjson.Value, path string) error {
	return fmt.Errorf("%s: %s, and the schema wants %s", path, v.Type(), jsKindNames[n.kind])
}

// text is a string, date-time or date value.
func (n *jsNode) text(v *fastjson.Value, path string) (any, error) {
	if v.Type() != fastjson.TypeString {
		return nil, n.wrong(v, path)
	}
	s := string(v.GetStringBytes())
	switch n.kind {
	case jsTimestamp:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a date-time (RFC 3339)", path, s)
		}
		return t.UTC(), nil
	case jsDate:
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a date (YYYY-MM-DD)", path, s)
		}
		return t, nil
	}
	return s, nil
}

func (n *jsNode) long(v *fastjson.Value, path string) (any, error) {
	if v.Type() != fastjson.TypeNumber {
		return nil, n.wrong(v, path)
	}
	if i, err := v.Int64(); err == nil {
		return i, nil
	}
	// 1.0 and 1e3 are integers too.
	f, err := v.Float64()
	if err != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return nil, fmt.Errorf("%s: %s is not an integer that fits 64 bits", path, v.MarshalTo(nil))
	}
	return int64(f), nil
}

func (n *jsNode) double(v *fastjson.Value, path string) (any, error) {
	if v.Type() != fastjson.TypeNumber {
		return nil, n.wrong(v, path)
	}
	f, err := v.Float64()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

func (n *jsNode) array(v *fastjson.Value, path string, undeclared *string) (any, error) {
	if v.Type() != fastjson.TypeArray {
		return nil, n.wrong(v, path)
	}
	items := v.GetArray()
	out := make([]any, len(items))
	for i, it := range items {
		var err error
		if out[i], err = n.items.value(it, n.items.null, path+"["+strconv.Itoa(i)+"]", undeclared); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (n *jsNode) mapOf(v *fastjson.Value, path string, undeclared *string) (any, error) {
	if v.Type() != fastjson.TypeObject {
		return nil, n.wrong(v, path)
	}
	out := map[string]any{}
	var err error
	v.GetObject().Visit(func(k []byte, x *fastjson.Value) {
		if err == nil {
			out[string(k)], err = n.items.value(x, n.items.null, path+"."+string(k), undeclared)
		}
	})
	return out, err
}

// record is an object of n's properties; the first property the schema
// does not declare is an error when it is closed, and is noted in
// undeclared when it is not.
func (n *jsNode) record(v *fastjson.Value, path string, undeclared *string) (any, error) {
	if v.Type() != fastjson.TypeObject {
		return nil, n.wrong(v, path)
	}
	o := v.GetObject()
	out := make(map[string]any, len(n.fields))
	found := 0
	for _, f := range n.fields {
		x := o.Get(f.key)
		if x != nil {
			found++
		}
		var err error
		if out[f.name], err = f.node.value(x, f.nullable, path+"."+f.key, undeclared); err != nil {
			return nil, err
		}
	}
	if o.Len() > found {
		var extra string
		o.Visit(func(k []byte, _ *fastjson.Value) {
			if extra == "" && !slices.ContainsFunc(n.fields, func(f jsField) bool { return f.key == string(k) }) {
				extra = string(k)
			}
		})
		switch {
		case extra == "": // a declared property given twice
		case n.closed:
			return nil, fmt.Errorf("%s: property %q is not in the schema, which has additionalProperties: false", path, extra)
		case *undeclared == "":
			*undeclared = path + "." + extra
		}
	}
	return out, nil
}
