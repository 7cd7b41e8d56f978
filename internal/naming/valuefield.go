package naming

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/murmur3"
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
// checks it with CheckFields; this file only renders and parses names.

// Date is a value field of Avro's date logical type: days since
// 1970-01-01. A time.Time is a timestamp.
type Date int32

// fieldTransform is one of Iceberg's transforms of a value field.
type fieldTransform uint8

const (
	fIdentity fieldTransform = iota
	fBucket
	fTruncate
	fYear
	fMonth
	fDay
	fHour
)

var transformNames = [...]string{"identity", "bucket", "truncate", "year", "month", "day", "hour"}

// valueField is a parsed {{value_field}}: which field (its index in
// Template.paths) and which transform (n: buckets or width).
type valueField struct {
	field int
	tr    fieldTransform
	n     int
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
		switch {
		case k == "path" && hasV:
			if !fieldPath.MatchString(v) {
				return piece{}, "", errAt(src, off, "bad path %q in %q at offset %d; a path is field names joined by \".\", such as user.country", v, whole, off)
			}
			path = v
			continue
		case seenTr:
			return piece{}, "", errAt(src, off, "%q at offset %d has two transforms; give one of identity, bucket=N, truncate=W, year, month, day, hour", whole, off)
		case !hasV && bareTransform(k) >= 0:
			vf.tr = fieldTransform(bareTransform(k))
		case hasV && (k == "bucket" || k == "truncate"):
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxBuckets || v[0] == '0' {
				return piece{}, "", errAt(src, off, "bad parameter %s=%s in %q at offset %d; it must be 1 to %d", k, v, whole, off, maxBuckets)
			}
			vf.tr, vf.n = fBucket, n
			if k == "truncate" {
				vf.tr = fTruncate
			}
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
		if _, err := p.vf.apply(vals[p.vf.field]); err != nil {
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
			return string(p.vf.append(nil, v)), nil
		}
	}
	return "", fmt.Errorf("the template has no {{value_field:path=%s}}", path)
}

// append renders v's transform, "null" when it has none. A value the
// transform can't take (CheckFields refuses it first) renders "null".
func (f *valueField) append(b []byte, v any) []byte {
	out, err := f.apply(v)
	if err != nil || out == nil {
		return append(b, "null"...)
	}
	switch o := out.(type) {
	case string:
		if o == "null" {
			// The string "null" is not the null value: escape a letter,
			// which URL decoding reads back as "null".
			return append(b, "%6Eull"...)
		}
		return appendURLEncoded(b, o)
	case []byte:
		return appendURLEncoded(b, base64.StdEncoding.EncodeToString(o))
	case int32:
		return strconv.AppendInt(b, int64(o), 10)
	case int64:
		return strconv.AppendInt(b, o, 10)
	case bool:
		return strconv.AppendBool(b, o)
	case Date:
		y, m, d, _ := civil(time.Unix(int64(o)*86400, 0), time.UTC)
		return appendDate(b, y, m, d)
	case timeValue:
		return o.append(b)
	}
	return append(b, "null"...)
}

// timeValue is a time transform's value: the UTC civil time, to the unit.
type timeValue struct {
	tr                     fieldTransform
	year, month, day, hour int64
}

func (v timeValue) append(b []byte) []byte {
	b = appendNum(b, v.year, true, 4)
	if v.tr == fYear {
		return b
	}
	b = append(b, '-')
	b = appendNum(b, v.month, true, 2)
	if v.tr == fMonth {
		return b
	}
	b = append(b, '-')
	b = appendNum(b, v.day, true, 2)
	if v.tr == fDay {
		return b
	}
	b = append(b, '-')
	return appendNum(b, v.hour, true, 2)
}

func appendDate(b []byte, y, m, d int64) []byte {
	return timeValue{tr: fDay, year: y, month: m, day: d}.append(b)
}

// apply is Iceberg's transform of v: nil for null, or the value rendered
// (string, []byte, int32, int64, bool, Date, timeValue), or an error for a
// type the transform does not take (Iceberg's spec, "Partition
// Transforms": bucket takes no bool or float, the time transforms only
// dates and timestamps, hour no date). Floats, decimals and nested values
// are refused by every transform.
func (f *valueField) apply(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch f.tr {
	case fIdentity:
		switch x := v.(type) {
		case string, []byte, int32, int64, bool, Date:
			return x, nil
		case time.Time:
			return nil, fmt.Errorf("is a timestamp (%s): partition it by hour, day, month or year", x.UTC().Format(time.RFC3339Nano))
		}
	case fBucket:
		if h, ok := bucketHash(v); ok {
			return (h & math.MaxInt32) % int32(f.n), nil
		}
	case fTruncate:
		w := int64(f.n)
		switch x := v.(type) {
		case int32:
			return int32(int64(x) - ((int64(x)%w)+w)%w), nil
		case int64:
			return x - ((x%w)+w)%w, nil
		case string:
			return truncateRunes(x, f.n), nil
		case []byte:
			return x[:min(len(x), f.n)], nil
		}
	default: // year, month, day, hour
		var ts time.Time
		switch x := v.(type) {
		case time.Time:
			ts = x
		case Date:
			if f.tr == fHour {
				return nil, fmt.Errorf("is a date, which has no hour; use day")
			}
			ts = time.Unix(int64(x)*86400, 0)
		default:
			return nil, fmt.Errorf("is a %s, not a date or timestamp, so %s does not apply", typeName(v), transformNames[f.tr])
		}
		y, m, d, h := civil(ts, time.UTC)
		return timeValue{tr: f.tr, year: y, month: m, day: d, hour: h}, nil
	}
	return nil, fmt.Errorf("is a %s, which %s does not take", typeName(v), transformNames[f.tr])
}

// bucketHash is the spec's murmur3_x86_32 hash of v: an int, long or date
// as its 8 bytes little-endian (as a long), a timestamp as its
// microseconds, a string as its UTF-8 bytes, binary as itself.
func bucketHash(v any) (int32, bool) {
	var l int64
	switch x := v.(type) {
	case int32:
		l = int64(x)
	case int64:
		l = x
	case Date:
		l = int64(x)
	case time.Time:
		l = x.UnixMicro()
	case string:
		return int32(murmur3.Sum32([]byte(x))), true
	case []byte:
		return int32(murmur3.Sum32(x)), true
	default:
		return 0, false
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(l))
	return int32(murmur3.Sum32(b[:])), true
}

// truncateRunes is s cut to w code points (Iceberg truncates strings by
// code point, not byte).
func truncateRunes(s string, w int) string {
	n := 0
	for i := range s {
		if n == w {
			return s[:i]
		}
		n++
	}
	return s
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case []byte:
		return "binary"
	case int32:
		return "int"
	case int64:
		return "long"
	case bool:
		return "boolean"
	case float32:
		return "float"
	case float64:
		return "double"
	case Date:
		return "date"
	case time.Time:
		return "timestamp"
	case map[string]any:
		return "record"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// appendURLEncoded is s escaped as Iceberg escapes a path's values
// (url.QueryEscape in iceberg-go's PartitionToPath; Java's URLEncoder
// differs in '*' and '~' only): letters, digits and "-_.~" as they are, a
// space as "+", every other byte as %XX.
func appendURLEncoded(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '~' || c == '_':
			b = append(b, c)
		case c == ' ':
			b = append(b, '+')
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}

// isFieldChar is a byte a rendered value field can hold.
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

// bareTransform is the index of a transform written without a parameter
// (identity, year, month, day, hour), or -1.
func bareTransform(k string) int {
	for t, name := range transformNames {
		if name == k && t != int(fBucket) && t != int(fTruncate) {
			return t
		}
	}
	return -1
}
