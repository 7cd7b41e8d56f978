package formattest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format/formatopts"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// GoldenTextRecords is the fixed input of the text formats (package format
// pins csv and bytes on it, package jsonfmt jsonl and json): keys, values
// and headers that are text, JSON, empty, null and in need of CSV quoting.
func GoldenTextRecords() []*kgo.Record {
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

// GoldenBinaryRecords need value_encoding base64 in every format but bytes.
func GoldenBinaryRecords() []*kgo.Record {
	t0 := time.UnixMilli(1733150000123)
	return []*kgo.Record{
		{Offset: 7, Timestamp: t0, Key: []byte{0xff, 0x00}, Value: []byte{0x00, 0x01, 0xfe, 0xff, '\n'},
			Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0x80}}}},
		{Offset: 8, Timestamp: t0, Key: []byte("text"), Value: []byte("text")},
		{Offset: 9, Timestamp: t0},
	}
}

// ReaderRecords are n records with the shapes the text formats must carry:
// JSON objects, text that needs CSV quoting or JSON escapes, empty and null
// keys and values, headers with null values. Every value is UTF-8, and
// with lines=false none holds a line break or a tab, so that a bytes file
// splits into one value per line.
func ReaderRecords(n int, lines bool) []*kgo.Record {
	t0 := time.UnixMilli(1733150000000)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		r := &kgo.Record{Offset: int64(1000 + i), Timestamp: t0.Add(time.Duration(i) * time.Millisecond), Key: fmt.Appendf(nil, "key-%d", i)}
		switch i % 8 {
		case 0:
			r.Value = fmt.Appendf(nil, `{"i":%d,"s":"x, \"y\"","a":[1,2,null]}`, i)
		case 1:
			r.Value = fmt.Appendf(nil, `text %d, with "quotes" and é 日本`, i)
		case 2:
			r.Value, r.Key = nil, nil // a tombstone without a key
		case 3:
			r.Value, r.Key = []byte{}, []byte{}
		case 4:
			r.Value = fmt.Appendf(nil, " leading space %d", i)
			if lines {
				r.Value = fmt.Appendf(nil, "two\r\nlines %d\n", i)
			}
		case 5:
			r.Value = fmt.Appendf(nil, "%d", i)
		case 6:
			r.Value = fmt.Appendf(nil, `"a JSON string %d"`, i)
		case 7:
			r.Value = []byte(`\.`)
		}
		if i%3 == 0 {
			r.Headers = []kgo.RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)}, {Key: "nil", Value: nil}}
		}
		recs[i] = r
	}
	return recs
}

// Encoder is the part of format.Encoder that WriteFile uses.
type Encoder interface {
	Encode(*kgo.Record) error
	Close() error
}

// Chain is how a package under test builds the sink's writer chain:
// compress is format.NewCompressor, encode the package's encoder.
type Chain struct {
	Compress func(kind string, w io.Writer) (io.WriteCloser, error)
	Encode   func(cfg formatopts.Options, w io.Writer) (Encoder, error)
}

// WriteFile encodes recs through the format and compression of cfg, as the
// sink chains them, into dir, and returns the file's path.
func WriteFile(t *testing.T, ch Chain, dir string, cfg formatopts.Options, recs []*kgo.Record) string {
	t.Helper()
	path := filepath.Join(dir, cfg.Type+"-"+cfg.Compression+naming.Extension(cfg.Type, cfg.Compression))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw, err := ch.Compress(cfg.Compression, f)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ch.Encode(cfg, zw)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatalf("Encode(offset %d): %v", r.Offset, err)
		}
	}
	for _, c := range []interface{ Close() error }{enc, zw, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// DuckPath is where DuckDB reads a file from: DuckDB reads gzip and zstd
// itself but not snappy framing, which python3-snappy undoes first.
func DuckPath(t *testing.T, path string) string {
	if strings.HasSuffix(path, ".snappy") {
		return outside.Unsnappy(t, path)
	}
	return path
}

// EncodeAll encodes recs with the encoder encode makes for cfg and closes
// it, failing on any error, and returns the bytes written.
func EncodeAll(t *testing.T, encode func(formatopts.Options, io.Writer) (Encoder, error), cfg formatopts.Options, recs ...*kgo.Record) string {
	t.Helper()
	var buf bytes.Buffer
	enc, err := encode(cfg, &buf)
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatalf("Encode(offset %d): %v", r.Offset, err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return buf.String()
}
