// Package formattest holds the test helpers that the format packages
// (format, avro, parquet, formats, jsonfmt) share: the fixed records they
// encode, the expected rows readers must find, and the golden-file check.
// It is for tests only; no production package may import it.
//
// It does not import package format, whose own tests use it: where a
// helper needs an encoder or a compressor, the caller passes it in.
package formattest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format/formatopts"
	"github.com/spillway/spillway/internal/testkit"
)

// AllFields are every envelope field, in the default order.
func AllFields() []string { return []string{"key", "value", "offset", "timestamp", "headers"} }

// TS is the timestamp of the fixed records.
var TS = time.UnixMilli(1733150000123)

// Compressions are every compression kind.
func Compressions() []string { return []string{"none", "gzip", "zstd", "snappy"} }

// Discard is io.Discard without its io.ReaderFrom, like a compressor.
type Discard struct{}

func (Discard) Write(p []byte) (int, error) { return len(p), nil }

// B64 is s in standard base64.
func B64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// ColumnarRecords are what the avro and parquet tests write: JSON, empty and
// non-ASCII text, a tombstone with a null key and no headers, a repeated
// header key, a null and an empty header value, a large offset and the
// epoch as timestamp. With binary, one more record holds bytes that are not
// UTF-8, which only value_encoding base64 can write.
func ColumnarRecords(binary bool) []*kgo.Record {
	recs := []*kgo.Record{
		{Offset: 0, Timestamp: TS, Key: []byte("k0"), Value: []byte(`{"a":1,"b":"x"}`),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "h"}, {Key: "trace", Value: []byte{}}}},
		{Offset: 1, Timestamp: TS.Add(time.Millisecond)},
		{Offset: 2, Timestamp: time.UnixMilli(0), Key: []byte{}, Value: []byte("ü€😀 \"quoted\"\nsecond line"),
			Headers: []kgo.RecordHeader{{Key: "ключ", Value: []byte("значение")}}},
		{Offset: 1 << 40, Timestamp: TS, Key: []byte("big"), Value: []byte{}},
	}
	if binary {
		recs = append(recs, &kgo.Record{Offset: 1<<40 + 1, Timestamp: TS, Key: []byte{0xff, 0}, Value: []byte{0, 1, 2, 0xfe, 0xff},
			Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0xc3}}}})
	}
	return recs
}

// ColumnarConfig is an enveloped format of typ; no fields means all.
func ColumnarConfig(typ, compression, encoding string, fields ...string) formatopts.Options {
	if len(fields) == 0 {
		fields = AllFields()
	}
	return formatopts.Options{Type: typ, Compression: compression, Fields: fields, ValueEncoding: encoding, Envelope: true}
}

// WantRows is what a reader should find for recs written with cfg, in
// the JSON form readers are compared in: numbers as float64, bytes as
// text or as blob(b), null as nil; only the configured fields.
func WantRows(t *testing.T, cfg formatopts.Options, recs []*kgo.Record, blob func([]byte) any) []map[string]any {
	t.Helper()
	text := cfg.ValueEncoding != "base64"
	val := func(b []byte) any {
		switch {
		case b == nil:
			return nil
		case text:
			return string(b)
		}
		return blob(b)
	}
	var rows []map[string]any
	for _, r := range recs {
		row := map[string]any{}
		for _, f := range cfg.Fields {
			switch f {
			case "key":
				row[f] = val(r.Key)
			case "value":
				row[f] = val(r.Value)
			case "offset":
				row[f] = r.Offset
			case "timestamp":
				row[f] = r.Timestamp.UnixMilli()
			case "partition":
				row[f] = r.Partition
			case "headers":
				hs := []any{}
				for _, h := range r.Headers {
					hs = append(hs, map[string]any{"key": h.Key, "value": val(h.Value)})
				}
				row[f] = hs
			}
		}
		rows = append(rows, row)
	}
	return JSONForm(t, rows)
}

// JSONForm round-trips v through JSON, so that values from Go and from a
// reader's JSON output compare with reflect.DeepEqual.
func JSONForm(t *testing.T, v any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// ColumnarCase is one configuration the reader tests cover.
type ColumnarCase struct {
	Name string
	Cfg  formatopts.Options
	Recs []*kgo.Record
}

// ColumnarCases: every compression with text values, every compression with
// binary values, a subset of fields in another order, no envelope, files
// of several blocks or pages, and a file with no records.
func ColumnarCases(typ string) []ColumnarCase {
	var cs []ColumnarCase
	for _, comp := range Compressions() {
		cs = append(cs,
			ColumnarCase{"text-" + comp, ColumnarConfig(typ, comp, "none"), ColumnarRecords(false)},
			ColumnarCase{"binary-" + comp, ColumnarConfig(typ, comp, "base64"), ColumnarRecords(true)},
		)
	}
	single := ColumnarConfig(typ, "zstd", "none", "value")
	single.Envelope = false
	return append(cs,
		ColumnarCase{"subset-reordered", ColumnarConfig(typ, "snappy", "none", "timestamp", "headers", "offset"), ColumnarRecords(false)},
		ColumnarCase{"partition", ColumnarConfig(typ, "gzip", "base64", "key", "partition", "value", "offset", "timestamp", "headers"), withPartitions(ColumnarRecords(true))},
		ColumnarCase{"no-envelope", single, ColumnarRecords(false)},
		ColumnarCase{"many-zstd", ColumnarConfig(typ, "zstd", "none"), Varied(1500, 1024)},
		ColumnarCase{"many-gzip", ColumnarConfig(typ, "gzip", "base64"), Varied(1500, 1024)},
		ColumnarCase{"empty", ColumnarConfig(typ, "zstd", "none"), nil}, // every record failed
	)
}

// withPartitions gives recs the Kafka partitions 0, 7, 14, ..., so that a
// reader that mixes them up or reads them all as one is caught.
func withPartitions(recs []*kgo.Record) []*kgo.Record {
	for i, r := range recs {
		r.Partition = int32(i * 7)
	}
	return recs
}

// CheckRows compares a reader's rows with the expected ones, field by
// field, so a failure names the record and the field.
func CheckRows(t *testing.T, what string, got, want []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d:\n got  %v\n want %v", what, len(got), len(want), got, want)
		return
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: row %d:\n got  %v\n want %v", what, i, got[i], want[i])
		}
	}
}

// UpdateGoldenEnv rewrites the golden files from the encoders' output when
// set to 1. Review the diff: a change in these bytes is a change of the file
// format that users' readers see.
const UpdateGoldenEnv = testkit.UpdateGoldenEnv

// Golden compares got with testdata/golden/name, or rewrites it when
// SPILLWAY_UPDATE_GOLDEN=1 (as TestGoldenTextFormats does).
func Golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if os.Getenv(UpdateGoldenEnv) == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with %s=1 to write it)", err, UpdateGoldenEnv)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes differ from the golden file's %d; if the change is meant and the readers' tests pass, rerun with %s=1 and review the diff", path, len(got), len(want), UpdateGoldenEnv)
	}
}

// Varied returns n records of about size bytes of JSON, no two alike, so
// that compressors and page encoders see realistic input.
func Varied(n, size int) []*kgo.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"checkout", "login", "search", "mobile", "desktop", "eu-west-1", "premium", "trial", "lorem", "ipsum", "dolor", "amet"}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Appendf(nil, `{"id":%d,"user":"u-%06d","event":"%s","amount":%d,"text":"`, i, rng.IntN(1_000_000), words[rng.IntN(len(words))], rng.IntN(100000))
		for len(v) < size-2 {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, ' ')
		}
		v = append(v, `"}`...)
		recs[i] = &kgo.Record{Offset: int64(i), Timestamp: TS, Key: fmt.Appendf(nil, "u-%d", i%977), Value: v,
			Headers: []kgo.RecordHeader{{Key: "trace-id", Value: fmt.Appendf(nil, "%032x", rng.Uint64())}}}
	}
	return recs
}
