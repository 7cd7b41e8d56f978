package tableschema

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spillway/spillway/internal/naming/partvalue"
)

// CheckTransform reports why s, an iceberg.partition_by entry, is not a
// transform Spillway can lay files out by, or nil: config's check, before
// any table exists.
func CheckTransform(s string) error {
	_, err := parseTransform(s)
	return err
}

// transform is one parsed partition_by entry.
type transform struct {
	kind   string // identity, day, hour, month, year, bucket, truncate
	column string // the record's partition, timestamp or key; a value field's path
	n      int
	// value: column is a field of the registry-typed value (naming's
	// {{value_field}} splits files by it), not the record's own.
	value bool
	name  string // the partition field's name, for a value field
}

var transformRE = regexp.MustCompile(`^\s*(?:(identity|year|month|day|hour|bucket|truncate)\s*\(\s*(?:(\d+)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)|([A-Za-z_][A-Za-z0-9_]*))\s*$`)

// parseTransform reads "partition", "day(timestamp)", "bucket(N, key)", or
// a transform of a field of the registry-typed value ("country",
// "identity(country)", "bucket(16, user_id)", "truncate(4, name)",
// "day(created_at)", a nested field by its dotted path): the transforms
// whose value Spillway knows for each file it writes, since it splits a
// partition's records into files by them (its Kafka partition, its
// records' hour or day, its key's bucket, its value's field; see naming's
// key_bucket and value_field).
func parseTransform(s string) (transform, error) {
	canon := partvalue.CanonTransform(s)
	if canon != PartitionColumn && !strings.HasSuffix(canon, "(timestamp)") && !strings.HasSuffix(canon, ",key)") && canon != "identity(partition)" {
		if vt, ok := partvalue.ParseValueTransform(canon); ok {
			return transform{kind: vt.Transform, column: vt.Path, n: vt.N, value: true, name: vt.FieldName()}, nil
		}
	}
	m := transformRE.FindStringSubmatch(s)
	if m == nil {
		return transform{}, errors.New(`is not a transform; use partition, day(timestamp), hour(timestamp), month(timestamp), year(timestamp), bucket(N, key), or of a value field: country, identity(country), bucket(16, user_id), truncate(4, name), day(created_at)`)
	}
	if m[4] != "" {
		return transform{kind: "identity", column: m[4]}, nil
	}
	t := transform{kind: m[1], column: m[3]}
	if m[2] != "" {
		n, err := strconv.Atoi(m[2])
		if err != nil || n <= 0 {
			return transform{}, fmt.Errorf("has a bad width %q; use a positive number", m[2])
		}
		t.n = n
	}
	switch t.kind {
	case "truncate":
		return transform{}, fmt.Errorf("truncates %s, which is the record's own; truncate a field of the value, such as truncate(4, name)", t.column)
	case "bucket":
		if t.n == 0 {
			return transform{}, fmt.Errorf("bucket needs the number of buckets; write bucket(16, %s)", t.column)
		}
		if t.column != "key" {
			return transform{}, fmt.Errorf("buckets %s, the record's own; use bucket(%d, key) or a field of the value", t.column, t.n)
		}
		return t, nil
	case "identity":
		if t.column != PartitionColumn {
			return transform{}, fmt.Errorf("partitions by %s, which is not a value field Spillway can lay out; use partition", t.column)
		}
	default:
		if t.column != "timestamp" {
			return transform{}, fmt.Errorf("applies %s to %s, the record's own; use %s(timestamp) or a date or timestamp field of the value", t.kind, t.column, t.kind)
		}
	}
	if t.n != 0 {
		return transform{}, fmt.Errorf("%s takes no width; write %s(%s)", t.kind, t.kind, t.column)
	}
	return t, nil
}
