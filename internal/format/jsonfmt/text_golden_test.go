package jsonfmt

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
)

// updateGoldenEnv rewrites the golden files from the encoders' output when
// set to 1. Review the diff: a change in these bytes is a change of the file
// format that users' readers see.
const updateGoldenEnv = "SPILLWAY_UPDATE_GOLDEN"

// goldenTextRecords is the fixed input of the text formats (package format
// pins csv and bytes on the same): keys, values and headers that are
// text, JSON, empty, null and in need of CSV quoting.
func goldenTextRecords() []*kgo.Record {
	t0 := time.UnixMilli(1733150000123)
	return []*kgo.Record{
		{Offset: 100, Timestamp: t0, Key: []byte("user-1"), Value: []byte(`{"id":1,"name":"Ada","tags":["a","b"]}`),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "source", Value: []byte("web")}}},
		{Offset: 101, Timestamp: t0.Add(time.Millisecond), Key: []byte("user-2"), Value: []byte("plain text, with a comma and \"quotes\"")},
		{Offset: 102, Timestamp: t0.Add(2 * time.Millisecond), Key: nil, Value: nil}, // a tombstone without a key
		{Offset: 103, Timestamp: t0.Add(3 * time.Millisecond), Key: []byte{}, Value: []byte{}},
		{Offset: 104, Timestamp: t0.Add(4 * time.Millisecond), Key: []byte("k"), Value: []byte("two\nlines and é 日本"),
			Headers: []kgo.RecordHeader{{Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}}},
		{Offset: 105, Timestamp: t0.Add(5 * time.Millisecond), Key: []byte("k"), Value: []byte(" 42")},
	}
}

// goldenBinaryRecords need value_encoding base64 in jsonl.
func goldenBinaryRecords() []*kgo.Record {
	t0 := time.UnixMilli(1733150000123)
	return []*kgo.Record{
		{Offset: 7, Timestamp: t0, Key: []byte{0xff, 0x00}, Value: []byte{0x00, 0x01, 0xfe, 0xff, '\n'},
			Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0x80}}}},
		{Offset: 8, Timestamp: t0, Key: []byte("text"), Value: []byte("text")},
		{Offset: 9, Timestamp: t0},
	}
}

// TestGoldenText pins the exact bytes of jsonl and json on fixed input,
// uncompressed (compressed bytes belong to the compression library).
func TestGoldenText(t *testing.T) {
	full := func(typ, enc string) config.Format {
		return config.Format{Type: typ, Fields: allFields, ValueEncoding: enc, Envelope: true, BytesSeparator: config.DefaultBytesSeparator}
	}
	cases := []struct {
		file string
		cfg  config.Format
		recs []*kgo.Record
	}{
		{"text.jsonl", full("jsonl", "none"), goldenTextRecords()},
		{"text.json", full("json", "none"), goldenTextRecords()},
		{"binary-base64.jsonl", full("jsonl", "base64"), goldenBinaryRecords()},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got := encodeAll(t, tc.cfg, tc.recs...)
			path := filepath.Join("testdata", "golden", tc.file)
			if os.Getenv(updateGoldenEnv) == "1" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with %s=1 to write it)", err, updateGoldenEnv)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Errorf("%s changed:\n got %q\nwant %q\n(if the change is meant, rerun with %s=1 and review the diff)", path, got, want, updateGoldenEnv)
			}
		})
	}
}
