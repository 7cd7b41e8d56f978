package naming

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spillway/spillway/internal/naming/partvalue"
)

// {{value_field:path=P[,transform]}} renders a field of the record's
// registry-typed value, by an Iceberg transform, as Iceberg writes the
// value in a Hive-style path (the Java PartitionSpec.partitionToPath:
// the transform's human string, URL-encoded). So a template such as
// "country={{value_field:path=country}}/..." lays files out by country as
// Confluent's FieldPartitioner does, and as an Iceberg table partitioned
// by identity(country) expects. Transforms:
//
//	{{value_field:path=country}}            identity
//	{{value_field:path=user_id,bucket=16}}  bucket(16, user_id)
//	{{value_field:path=name,truncate=4}}    truncate(4, name)
//	{{value_field:path=ts,day}}             day(ts): also year, month, hour
//
// The caller reads the field (Vars.Fields, in the order of FieldPaths) and
// checks it with CheckFields; partvalue applies the transforms and writes
// their text, and this file parses the variable and matches its text.

// valueField is a parsed {{value_field}}: which field (its index in
// Template.paths) and which transform.
type valueField struct {
	field int
	tr    partvalue.Transform
}

// fieldPath is a dotted path of Avro field names.
var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// parseValueField parses the inside of {{value_field:...}} (params, after
// the colon) into a piece; the template registers its path.
func parseValueField(src string, off int, whole, params string) (piece, string, error) {
	vf := &valueField{}
	var path string
	seenTr := false
	for _, p := range strings.Split(params, ",") {
		k, v, hasV := strings.Cut(strings.TrimSpace(p), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		bare, isBare := partvalue.NewTransform(k, 0)
		switch {
		case k == "path" && hasV:
			if !fieldPath.MatchString(v) {
				return piece{}, "", errAt(src, off, "bad path %q in %q at offset %d; a path is field names joined by \".\", such as user.country", v, whole, off)
			}
			path = v
			continue
		case seenTr:
			return piece{}, "", errAt(src, off, "%q at offset %d has two transforms; give one of identity, bucket=N, truncate=W, year, month, day, hour", whole, off)
		case !hasV && isBare:
			vf.tr = bare
		case hasV && (k == "bucket" || k == "truncate"):
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > partvalue.MaxBuckets || v[0] == '0' {
				return piece{}, "", errAt(src, off, "bad parameter %s=%s in %q at offset %d; it must be 1 to %d", k, v, whole, off, partvalue.MaxBuckets)
			}
			vf.tr, _ = partvalue.NewTransform(k, n)
		default:
			return piece{}, "", errAt(src, off, "bad parameter %q in %q at offset %d; use path=<field> and one of identity, bucket=N, truncate=W, year, month, day, hour", p, whole, off)
		}
		seenTr = true
	}
	if path == "" {
		return piece{}, "", errAt(src, off, "%q at offset %d has no path; write {{value_field:path=country}}", whole, off)
	}
	return piece{kind: valueFieldVar, vf: vf}, path, nil
}

// FieldPaths are the value fields the template renders, each once: the
// caller reads them from each record into Vars.Fields, in this order.
func (t *Template) FieldPaths() []string { return t.paths }

// CheckFields reports a value (of Vars.Fields) that a transform of the
// template can't take, such as day of a string: such a record has no place
// in the layout, and goes to the error policy. nil (a null or absent
// field) fits every transform.
func (t *Template) CheckFields(vals []any) error {
	for _, p := range t.pieces {
		if p.kind != valueFieldVar {
			continue
		}
		if p.vf.field >= len(vals) {
			return fmt.Errorf("the value field %s was not read", t.paths[p.vf.field])
		}
		if err := p.vf.tr.Check(vals[p.vf.field]); err != nil {
			return fmt.Errorf("value field %s: %w", t.paths[p.vf.field], err)
		}
	}
	return nil
}

// FieldText is what the template's {{value_field}} of path renders for v
// (its first with path), and false when it has none: the Hive path text of
// Iceberg's transform of v.
func (t *Template) FieldText(path string, v any) (string, error) {
	for _, p := range t.pieces {
		if p.kind == valueFieldVar && t.paths[p.vf.field] == path {
			return string(p.vf.tr.AppendText(nil, v)), nil
		}
	}
	return "", fmt.Errorf("the template has no {{value_field:path=%s}}", path)
}

// isFieldChar is a byte a rendered value field can hold: what
// partvalue's URL encoding writes.
func isFieldChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-~_+%", c) >= 0
}

// fieldLens are the lengths of the ways s can start with a rendered value
// field, longest first.
func fieldLens(s string) []int {
	n := 0
	for n < len(s) && isFieldChar(s[n]) {
		n++
	}
	out := make([]int, 0, n+1)
	for ; n >= 0; n-- {
		out = append(out, n)
	}
	return out
}

// parseValueFieldVar parses {{value_field:...}}; param is what follows
// the colon.
func parseValueFieldVar(src string, off int, whole, param string) (piece, error) {
	if param == "" {
		return piece{}, errAt(src, off, "%q at offset %d has no path; write {{value_field:path=country}}", whole, off)
	}
	p, path, err := parseValueField(src, off, whole, param)
	if err != nil {
		return piece{}, err
	}
	p.text = path // addValueField files it under Template.paths
	return p, nil
}

// addValueField files p's path among the template's value fields. lit is
// the literal text before p: p must follow text of its own path segment
// (such as "country="), since a value can render "", "." or "..".
func (t *Template) addValueField(p *piece, src string, off int, whole, lit string) error {
	prev := lit
	if prev == "" && len(t.pieces) > 0 {
		last := t.pieces[len(t.pieces)-1]
		if last.kind == literal {
			prev = last.text
		} else {
			prev = "x" // a variable: never empty
		}
	}
	if prev == "" || strings.HasSuffix(prev, "/") {
		return errAt(src, off, "%q at offset %d starts a path segment; a value can be empty, so put its name before it, as Hive does: country=%s", whole, off, whole)
	}
	path := p.text
	i := 0
	for i < len(t.paths) && t.paths[i] != path {
		i++
	}
	if i == len(t.paths) {
		t.paths = append(t.paths, path)
	}
	p.vf.field = i
	return nil
}

// fieldOf is vals[i], nil when the caller read fewer.
func fieldOf(vals []any, i int) any {
	if i < len(vals) {
		return vals[i]
	}
	return nil
}
