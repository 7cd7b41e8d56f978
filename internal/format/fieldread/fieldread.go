// Package fieldread reads fields of registry-typed record values for the
// router, which splits files by them ({{value_field}}, an Iceberg table's
// value-field partitions) before it picks a record's file: an Avro value
// through a projection of its schema onto those fields, not decoded whole.
package fieldread

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/naming/partvalue"
	"github.com/spillway/spillway/internal/registry"
)

// Reader reads fields of registry-typed values for the router, which
// splits files by them ({{value_field}}) before it picks a record's file.
// It reads only the registry's cache, like the encoders (the runner
// resolves every id of a batch first), and is safe for concurrent use.
//
// An Avro value is decoded through a projection of its schema onto the
// fields asked for (avro.Resolve skips the rest), not decoded whole; a
// Protobuf or JSON Schema value is decoded whole (Columns.Value). A field
// the value's schema lacks reads as null: an Iceberg reader reads a column
// that a file's schema lacks as null too, so the record's partition value
// is the one its row shows. A value that is not registry-encoded, of an
// unknown id, not a record, or whose path crosses a field that is not a
// record, is a record error (format.ErrRecord), for the error policy.
type Reader struct {
	reg   *registry.Registry
	paths [][]string
	plans sync.Map // *registry.Columns → *fieldPlan
}

// New reads paths (dotted, as naming.Template.FieldPaths gives
// them) from the values reg types.
func New(reg *registry.Registry, paths []string) *Reader {
	f := &Reader{reg: reg}
	for _, p := range paths {
		f.paths = append(f.paths, strings.Split(p, "."))
	}
	return f
}

// fieldPlan is how the values of one schema (one Columns) are read.
type fieldPlan struct {
	err   error        // the schema can't give the fields (a record error)
	proj  *avro.Schema // the Avro projection, nil to decode whole
	kinds []string     // per path: its leaf's kind (see leafKind), "" absent
	avro  bool         // decode with proj
	cols  *registry.Columns
}

// Fields reads r's value's fields into dst[:0], one per path (nil for a
// null or absent field). A null value has null fields.
func (f *Reader) Fields(r *kgo.Record, dst []any) ([]any, error) {
	dst = dst[:0]
	if r.Value == nil {
		for range f.paths {
			dst = append(dst, nil)
		}
		return dst, nil
	}
	id, data, err := registry.ID(r.Value)
	if err != nil {
		return dst, format.PartError("value", r, err)
	}
	s, ok := f.reg.Lookup(id)
	switch {
	case !ok:
		return dst, format.PartError("value", r, fmt.Errorf("%w: schema id %d was not fetched before the record was written", registry.ErrUndecodable, id))
	case s.Err != nil:
		return dst, format.PartError("value", r, s.Err)
	}
	cols, err := s.Columns(data)
	if err != nil {
		return dst, format.PartError("value", r, err)
	}
	p := f.plan(cols)
	if p.err != nil {
		return dst, format.PartError("value", r, fmt.Errorf("schema id %d: %w", id, p.err))
	}
	var v any
	if p.avro {
		rest, err := p.proj.Decode(data, &v)
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d bytes left over", len(rest))
		}
		if err != nil {
			return dst, format.PartError("value", r, fmt.Errorf("%w: does not decode with Avro schema id %d: %w", registry.ErrUndecodable, id, err))
		}
	} else if v, err = cols.Value(data); err != nil {
		return dst, format.PartError("value", r, err)
	}
	for i, path := range f.paths {
		fv, err := pick(v, path, p.kinds[i])
		if err != nil {
			return dst, format.PartError("value", r, fmt.Errorf("field %s: %w", strings.Join(path, "."), err))
		}
		dst = append(dst, fv)
	}
	return dst, nil
}

// plan is the cached plan of cols.
func (f *Reader) plan(cols *registry.Columns) *fieldPlan {
	if p, ok := f.plans.Load(cols); ok {
		return p.(*fieldPlan)
	}
	p := f.build(cols)
	f.plans.Store(cols, p)
	return p
}

func (f *Reader) build(cols *registry.Columns) *fieldPlan {
	p := &fieldPlan{cols: cols}
	root := cols.Schema.Root()
	if nonNull(root).Type != "record" {
		p.err = fmt.Errorf("%w: the value is a %s, not a record, so it has no field %s", registry.ErrUndecodable, nonNull(root).Type, strings.Join(f.paths[0], "."))
		return p
	}
	for _, path := range f.paths {
		kind, err := leafKind(root, path)
		if err != nil {
			p.err = fmt.Errorf("%w: field %s: %w", registry.ErrUndecodable, strings.Join(path, "."), err)
			return p
		}
		p.kinds = append(p.kinds, kind)
	}
	if cols.Avro {
		// Decode only the fields asked for: a reader schema that keeps
		// them, resolved against the writer's, skips the others.
		proj := project(*root, f.paths)
		rs, err := proj.Schema()
		if err == nil {
			if p.proj, err = avro.Resolve(cols.Schema, rs); err == nil {
				p.avro = true
			}
		}
	}
	return p
}

// nonNull is n, or the one branch of a union of null and it.
func nonNull(n *avro.SchemaNode) *avro.SchemaNode {
	if n.Type != "union" {
		return n
	}
	var out *avro.SchemaNode
	for i := range n.Branches {
		if n.Branches[i].Type != "null" {
			if out != nil {
				return n // a union of several types: no one kind
			}
			out = &n.Branches[i]
		}
	}
	if out == nil {
		return n
	}
	return out
}

// leafKind is the kind of path's field in root: string, bytes, int, long,
// boolean, date, timestamp, or another Avro type (which partvalue's
// transforms refuse per record); "" when a record on the path lacks the
// field.
func leafKind(root *avro.SchemaNode, path []string) (string, error) {
	n := nonNull(root)
	for i, name := range path {
		if n.Type != "record" {
			return "", fmt.Errorf("%s is a %s, not a record", strings.Join(path[:i], "."), n.Type)
		}
		var next *avro.SchemaNode
		for j := range n.Fields {
			if n.Fields[j].Name == name {
				next = &n.Fields[j].Type
			}
		}
		if next == nil {
			return "", nil
		}
		n = nonNull(next)
	}
	switch {
	case n.LogicalType == "date" && n.Type == "int":
		return "date", nil
	case strings.HasPrefix(n.LogicalType, "timestamp-") && n.Type == "long",
		strings.HasPrefix(n.LogicalType, "local-timestamp-") && n.Type == "long":
		return "timestamp", nil
	case n.LogicalType == "decimal":
		return "decimal", nil
	case n.Type == "enum":
		return "string", nil
	case n.Type == "fixed":
		return "bytes", nil
	}
	return n.Type, nil
}

// project is n with only the fields on paths, nested records cut alike.
func project(n avro.SchemaNode, paths [][]string) avro.SchemaNode {
	if n.Type == "union" {
		br := make([]avro.SchemaNode, len(n.Branches))
		for i, b := range n.Branches {
			br[i] = project(b, paths)
		}
		n.Branches = br
		return n
	}
	if n.Type != "record" {
		return n
	}
	var fields []avro.SchemaField
	for _, fl := range n.Fields {
		var sub [][]string
		for _, p := range paths {
			if len(p) > 0 && p[0] == fl.Name {
				sub = append(sub, p[1:])
			}
		}
		if len(sub) > 0 {
			fl.Type = project(fl.Type, sub)
			fields = append(fields, fl)
		}
	}
	n.Fields = fields
	return n
}

// errNotRecord: a path crosses a value that is not a record.
var errNotRecord = errors.New("is not a record")

// pick is path's value in v (a decoded record), as partvalue's transforms
// take it: a date as partvalue.Date, a timestamp as time.Time in UTC.
func pick(v any, path []string, kind string) (any, error) {
	if kind == "" {
		return nil, nil // the schema lacks it: null
	}
	for _, name := range path {
		if v == nil {
			return nil, nil // a null record on the way
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w (a %T)", errNotRecord, v)
		}
		v = m[name]
	}
	switch x := v.(type) {
	case time.Time:
		if kind == "date" {
			return partvalue.Date(floorDays(x.Unix())), nil
		}
		return x.UTC(), nil
	case int32:
		if kind == "date" {
			return partvalue.Date(x), nil
		}
	case int64:
		if kind == "timestamp" {
			return nil, fmt.Errorf("a timestamp decoded as a number (%d)", x)
		}
	}
	return v, nil
}

func floorDays(sec int64) int64 {
	d := sec / 86400
	if sec%86400 < 0 {
		d--
	}
	return d
}
