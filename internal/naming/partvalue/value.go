package partvalue

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/murmur3"
)

// Date is a value field of Avro's date logical type: days since
// 1970-01-01. A time.Time is a timestamp.
type Date int32

// kind is one of Iceberg's transforms.
type kind uint8

const (
	fIdentity kind = iota
	fBucket
	fTruncate
	fYear
	fMonth
	fDay
	fHour
)

var transformNames = [...]string{"identity", "bucket", "truncate", "year", "month", "day", "hour"}

// MaxBuckets bounds a bucket count or a truncate width: Iceberg's values
// are int32.
const MaxBuckets = 1<<31 - 1

// Transform is one of Iceberg's transforms of a field of the record's
// value, ready to apply: the zero Transform is identity.
type Transform struct {
	kind kind
	n    int // buckets or width
}

// NewTransform is the transform name (identity, bucket, truncate, year,
// month, day or hour) with n its buckets or width, 1 to MaxBuckets, for
// bucket and truncate, and 0 for the others; false for any other name or
// n.
func NewTransform(name string, n int) (Transform, bool) {
	for k, s := range transformNames {
		if s != name {
			continue
		}
		takesN := kind(k) == fBucket || kind(k) == fTruncate
		if takesN != (n != 0) || n < 0 || n > MaxBuckets {
			return Transform{}, false
		}
		return Transform{kind: kind(k), n: n}, true
	}
	return Transform{}, false
}

// Check reports a value the transform can't take, such as day of a
// string; nil (a null or absent field) fits every transform.
func (f Transform) Check(v any) error {
	_, err := f.apply(v)
	return err
}

// AppendText appends the path text of v's transform: Iceberg's human
// string of the value, URL-encoded as a Hive-style path writes it, "null"
// when it has none. A value the transform can't take (Check refuses it
// first) renders "null".
func (f Transform) AppendText(b []byte, v any) []byte {
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
		y, m, d, _ := Civil(time.Unix(int64(o)*86400, 0), time.UTC)
		return appendDate(b, y, m, d)
	case timeValue:
		return o.append(b)
	}
	return append(b, "null"...)
}

// timeValue is a time transform's value: the UTC civil time, to the unit.
type timeValue struct {
	tr                     kind
	year, month, day, hour int64
}

func (v timeValue) append(b []byte) []byte {
	b = AppendPadded(b, v.year, 4)
	if v.tr == fYear {
		return b
	}
	b = append(b, '-')
	b = AppendPadded(b, v.month, 2)
	if v.tr == fMonth {
		return b
	}
	b = append(b, '-')
	b = AppendPadded(b, v.day, 2)
	if v.tr == fDay {
		return b
	}
	b = append(b, '-')
	return AppendPadded(b, v.hour, 2)
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
func (f Transform) apply(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch f.kind {
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
			if f.kind == fHour {
				return nil, fmt.Errorf("is a date, which has no hour; use day")
			}
			ts = time.Unix(int64(x)*86400, 0)
		default:
			return nil, fmt.Errorf("is a %s, not a date or timestamp, so %s does not apply", typeName(v), transformNames[f.kind])
		}
		y, m, d, h := Civil(ts, time.UTC)
		return timeValue{tr: f.kind, year: y, month: m, day: d, hour: h}, nil
	}
	return nil, fmt.Errorf("is a %s, which %s does not take", typeName(v), transformNames[f.kind])
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
