package partvalue

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTransformSpecVectors: the transforms give the values of Iceberg's
// spec (appendix B's hashes; the truncate and time examples of
// "Partition Transforms"), written as a Hive-style path writes them. With
// MaxBuckets buckets a bucket is the hash itself, masked to 31 bits.
func TestTransformSpecVectors(t *testing.T) {
	t.Parallel()
	ts := time.Date(2017, 11, 16, 22, 31, 8, 0, time.UTC)
	date := Date(time.Date(2017, 11, 16, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	mask := func(h int32) string { return itoa(int64(h & math.MaxInt32)) }
	tr := func(name string, n int) Transform {
		f, ok := NewTransform(name, n)
		if !ok {
			t.Fatalf("NewTransform(%q, %d) refused", name, n)
		}
		return f
	}
	for _, tc := range []struct {
		f    Transform
		v    any
		want string
	}{
		{tr("bucket", MaxBuckets), int32(34), mask(2017239379)},
		{tr("bucket", MaxBuckets), int64(34), mask(2017239379)},
		{tr("bucket", MaxBuckets), date, mask(-653330422)},
		{tr("bucket", MaxBuckets), ts, mask(-2047944441)},
		{tr("bucket", MaxBuckets), "iceberg", mask(1210000089)},
		{tr("bucket", MaxBuckets), []byte{0, 1, 2, 3}, mask(-188683207)},
		{tr("bucket", 16), "iceberg", itoa(1210000089 % 16)},
		{tr("truncate", 10), int32(1), "0"},
		{tr("truncate", 10), int32(-1), "-10"},
		{tr("truncate", 10), int64(-1), "-10"},
		{tr("truncate", 3), "iceberg", "ice"},
		{tr("truncate", 2), "été", "%C3%A9t"}, // code points, not bytes
		{tr("truncate", 2), []byte{0xff, 0xfe, 0xfd}, "%2F%2F4%3D"},
		{tr("year", 0), ts, "2017"},
		{tr("month", 0), ts, "2017-11"},
		{tr("day", 0), ts, "2017-11-16"},
		{tr("hour", 0), ts, "2017-11-16-22"},
		{tr("day", 0), date, "2017-11-16"},
		{tr("identity", 0), "a b/c~", "a+b%2Fc~"},
		{tr("identity", 0), "null", "%6Eull"}, // the string, not the null value
		{tr("identity", 0), nil, "null"},
		{tr("identity", 0), int64(-7), "-7"},
		{tr("identity", 0), true, "true"},
		{tr("identity", 0), date, "2017-11-16"},
	} {
		if err := tc.f.Check(tc.v); err != nil {
			t.Errorf("%v of %#v: Check: %v", tc.f, tc.v, err)
		}
		if got := string(tc.f.AppendText(nil, tc.v)); got != tc.want {
			t.Errorf("%v of %#v = %q, want %q", tc.f, tc.v, got, tc.want)
		}
	}
}

// TestTransformRefuses: a value of a type the spec's transform does not
// take is refused, naming its type, and renders "null" if rendered anyway.
func TestTransformRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int
		v    any
		want string
	}{
		{"identity", 0, time.Unix(0, 0), "is a timestamp"},
		{"identity", 0, 1.5, "is a double"},
		{"bucket", 4, true, "is a boolean, which bucket does not take"},
		{"truncate", 4, float32(1), "is a float"},
		{"day", 0, "2017-11-16", "is a string, not a date or timestamp"},
		{"hour", 0, Date(1), "is a date, which has no hour"},
		{"month", 0, map[string]any{}, "is a record"},
	} {
		f, _ := NewTransform(tc.name, tc.n)
		if err := f.Check(tc.v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s of %#v: Check = %v, want %q", tc.name, tc.v, err, tc.want)
		}
		if got := string(f.AppendText(nil, tc.v)); got != "null" {
			t.Errorf("%s of %#v rendered %q, want null", tc.name, tc.v, got)
		}
	}
	for _, bad := range []struct {
		name string
		n    int
	}{{"bucket", 0}, {"truncate", MaxBuckets + 1}, {"day", 4}, {"identity", -1}, {"void", 0}, {"Day", 0}} {
		if _, ok := NewTransform(bad.name, bad.n); ok {
			t.Errorf("NewTransform(%q, %d) accepted", bad.name, bad.n)
		}
	}
}

// TestValueFields: partition_by's value-field entries, canonical, are told
// from the record's own partition, timestamp and key, and named as
// Iceberg names their partition fields.
func TestValueFields(t *testing.T) {
	t.Parallel()
	var by []string
	for _, s := range []string{"Partition", "DAY( Timestamp )", "bucket(8, KEY)", "Country", "bucket(16,user.id)", "truncate(4,name)", "hour(created_at)"} {
		by = append(by, CanonTransform(s))
	}
	if want := []string{"partition", "day(timestamp)", "bucket(8,key)", "Country", "bucket(16,user.id)", "truncate(4,name)", "hour(created_at)"}; !slices.Equal(by, want) {
		t.Fatalf("canonical: %q, want %q", by, want)
	}
	var names []string
	for _, vt := range ValueFields(by) {
		names = append(names, vt.FieldName())
	}
	if want := []string{"Country", "user_id_bucket", "name_trunc", "created_at_hour"}; !slices.Equal(names, want) {
		t.Errorf("field names %q, want %q", names, want)
	}
	if vt, ok := ParseValueTransform("bucket(16,user.id)"); !ok || vt != (ValueTransform{Transform: "bucket", Path: "user.id", N: 16}) {
		t.Errorf("ParseValueTransform = %+v, %v", vt, ok)
	}
	for _, s := range []string{"bucket(2147483648,x)", "day(key)", "identity(partition)", "1abc", "bucket(0,x)"} {
		if vt, ok := ParseValueTransform(s); ok {
			t.Errorf("ParseValueTransform(%q) = %+v", s, vt)
		}
	}
}

// TestKeyBucketSpecVectors: KeyBucket hashes the key's bytes as the spec's
// string and binary hashes do.
func TestKeyBucketSpecVectors(t *testing.T) {
	t.Parallel()
	if got := KeyBucket([]byte("iceberg"), MaxBuckets); got != 1210000089 {
		t.Errorf("bucket of iceberg = %d", got)
	}
	if got := KeyBucket([]byte{0, 1, 2, 3}, 7); got != (-188683207&math.MaxInt32)%7 {
		t.Errorf("bucket of 00010203 among 7 = %d", got)
	}
}

func itoa(n int64) string { return string(AppendPadded(nil, n, 0)) }
