package testkit

import (
	"bytes"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// HostileRecord is record i of a source partition: binary keys and values with
// NUL and invalid UTF-8, null keys, tombstones, empty keys and values,
// repeated, binary, null and empty header values, and timestamps that are
// old and out of order.
func HostileRecord(i int, partition int32) *kgo.Record {
	r := &kgo.Record{Partition: partition}
	switch i % 5 {
	case 0:
		r.Key = nil
	case 1:
		r.Key = []byte{}
	case 2:
		r.Key = []byte{0, 0xff, 0xfe, 'k', 0, byte(i)}
	default:
		r.Key = fmt.Appendf(nil, "key-%d", i)
	}
	switch i % 7 {
	case 0:
		r.Value = nil // a tombstone
	case 1:
		r.Value = []byte{}
	case 2:
		r.Value = append([]byte{0, 0xc3, 0x28, '\n', '"', '\\'}, bytes.Repeat([]byte{byte(i)}, i%300)...)
	case 3:
		r.Value = []byte(`{"a": 1,` + "\n" + ` "b": "x"}`)
	default:
		r.Value = fmt.Appendf(nil, `"v%d"`, i)
	}
	switch i % 4 {
	case 1:
		r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte{0, 0xff}}, {Key: "n", Value: nil}, {Key: "e", Value: []byte{}}}
	case 2:
		r.Headers = []kgo.RecordHeader{{Key: "only", Value: []byte("x")}}
	}
	// Old (1990s, even before 1970) and out of order.
	r.Timestamp = time.UnixMilli(int64(631152000000 + (i%3)*86400000 - i*1000))
	if i%11 == 5 {
		r.Timestamp = time.UnixMilli(1234)
	}
	return r
}

// SameBytes reports whether a and b hold the same bytes, null and empty
// apart.
func SameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// SameRecord says how got differs from want in key, value, timestamp (to
// the millisecond) or headers, null and empty apart, or nil.
func SameRecord(want, got *kgo.Record) error {
	switch {
	case !SameBytes(want.Key, got.Key):
		return fmt.Errorf("key %q (nil %v), want %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !SameBytes(want.Value, got.Value):
		return fmt.Errorf("value %q (nil %v), want %q (nil %v)", got.Value, got.Value == nil, want.Value, want.Value == nil)
	case want.Timestamp.UnixMilli() != got.Timestamp.UnixMilli():
		return fmt.Errorf("timestamp %d, want %d", got.Timestamp.UnixMilli(), want.Timestamp.UnixMilli())
	case len(want.Headers) != len(got.Headers):
		return fmt.Errorf("headers %v, want %v", got.Headers, want.Headers)
	}
	for i := range want.Headers {
		if want.Headers[i].Key != got.Headers[i].Key || !SameBytes(want.Headers[i].Value, got.Headers[i].Value) {
			return fmt.Errorf("header %d %q=%q (nil %v), want %q=%q (nil %v)", i, got.Headers[i].Key, got.Headers[i].Value, got.Headers[i].Value == nil,
				want.Headers[i].Key, want.Headers[i].Value, want.Headers[i].Value == nil)
		}
	}
	return nil
}
