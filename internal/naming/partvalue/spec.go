package partvalue

import (
	"regexp"
	"strconv"
	"strings"
)

// The entries of iceberg.partition_by that are value fields.

// spaces are dropped inside a transform: "day( timestamp )" is day(timestamp).
var spaces = regexp.MustCompile(`\s+`)

// CanonTransform is a partition_by entry in canonical form: no spaces, the
// transform's name in lower case, and so are partition, key and timestamp
// (the record's own); a value field keeps its case, as Avro's names are
// case-sensitive.
func CanonTransform(s string) string {
	s = spaces.ReplaceAllString(s, "")
	canonArg := func(a string) string {
		for _, w := range []string{"partition", "key", "timestamp"} {
			if strings.EqualFold(a, w) {
				return w
			}
		}
		return a
	}
	fn, rest, ok := strings.Cut(s, "(")
	if !ok || !strings.HasSuffix(rest, ")") {
		return canonArg(s)
	}
	args := strings.Split(strings.TrimSuffix(rest, ")"), ",")
	for i, a := range args {
		args[i] = canonArg(a)
	}
	return strings.ToLower(fn) + "(" + strings.Join(args, ",") + ")"
}

// ValueTransform is a partition_by entry of a value field (canonical):
// Transform (identity, bucket, truncate, year, month, day, hour) of the
// value's field Path, N its buckets or width.
type ValueTransform struct {
	Transform string
	Path      string
	N         int
}

var (
	valueTimeRE  = regexp.MustCompile(`^(identity|year|month|day|hour)\(([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\)$`)
	valueParamRE = regexp.MustCompile(`^(bucket|truncate)\(([1-9][0-9]{0,9}),([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\)$`)
	valueBareRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$`)
)

// ParseValueTransform reads t (canonical) as a transform of a value
// field: "country" (Iceberg's Spark DDL for identity), identity(country),
// bucket(16,user_id), truncate(4,name), day(created_at), ... The record's
// own partition, timestamp and key are not value fields.
func ParseValueTransform(t string) (ValueTransform, bool) {
	var vt ValueTransform
	switch {
	case valueBareRE.MatchString(t):
		vt = ValueTransform{Transform: "identity", Path: t}
	case valueTimeRE.MatchString(t):
		m := valueTimeRE.FindStringSubmatch(t)
		vt = ValueTransform{Transform: m[1], Path: m[2]}
	case valueParamRE.MatchString(t):
		m := valueParamRE.FindStringSubmatch(t)
		n, err := strconv.Atoi(m[2])
		if err != nil || n > MaxBuckets {
			return ValueTransform{}, false
		}
		vt = ValueTransform{Transform: m[1], Path: m[3], N: n}
	default:
		return ValueTransform{}, false
	}
	switch vt.Path {
	case "partition", "key", "timestamp":
		return ValueTransform{}, false
	}
	return vt, true
}

// FieldName is the transform's Iceberg partition field name, as Iceberg
// names it by default: the path for identity, else path_bucket,
// path_trunc, path_year, ... (a nested path's dots as "_").
func (vt ValueTransform) FieldName() string {
	// iceberg-go refuses a "." in a partition field's name (Java takes
	// it): a nested path's dots become "_".
	name := strings.ReplaceAll(vt.Path, ".", "_")
	switch vt.Transform {
	case "identity":
		return name
	case "truncate":
		return name + "_trunc"
	}
	return name + "_" + vt.Transform
}

// ValueFields are the value fields partitionBy (canonical) transforms; its
// other entries (the record's partition, timestamp and key) are skipped.
func ValueFields(partitionBy []string) []ValueTransform {
	var out []ValueTransform
	for _, t := range partitionBy {
		if vt, ok := ParseValueTransform(t); ok {
			out = append(out, vt)
		}
	}
	return out
}
