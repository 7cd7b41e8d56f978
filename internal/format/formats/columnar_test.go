package formats

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
)

// TestColumnarRecordErrorWritesNothing: a record the envelope can't hold is
// an format.ErrRecord that leaves nothing in the file, which still reads back with
// every other record.
func TestColumnarRecordErrorWritesNothing(t *testing.T) {
	bad := []byte{'o', 'k', 0xff}
	good := func(o int64) *kgo.Record {
		return &kgo.Record{Offset: o, Timestamp: formattest.TS, Value: []byte("fine")}
	}
	for _, tc := range []struct {
		name, encoding string
		rec            *kgo.Record
		want           string
	}{
		{"value", "none", &kgo.Record{Offset: 17, Value: bad}, "value at offset 17 is not valid UTF-8; set format.value_encoding: base64"},
		{"key", "none", &kgo.Record{Offset: 18, Key: bad}, "key at offset 18 is not valid UTF-8"},
		{"header value", "none", &kgo.Record{Offset: 19, Headers: []kgo.RecordHeader{{Key: "ok", Value: []byte("x")}, {Key: "h", Value: bad}}},
			`value of header "h" at offset 19 is not valid UTF-8`},
		{"header key", "base64", &kgo.Record{Offset: 20, Headers: []kgo.RecordHeader{{Key: string(bad)}}}, "header key"},
	} {
		for _, typ := range []string{"avro", "parquet"} {
			name := typ + "/" + tc.name
			var buf bytes.Buffer
			cfg := formattest.ColumnarConfig(typ, "none", tc.encoding)
			enc, err := NewEncoder(cfg, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Encode(good(1)); err != nil {
				t.Fatal(err)
			}
			before := buf.Len()
			err = enc.Encode(tc.rec)
			if !errors.Is(err, format.ErrRecord) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want format.ErrRecord containing %q", name, err, tc.want)
			}
			if buf.Len() != before {
				t.Errorf("%s: the failed record wrote %d B", name, buf.Len()-before)
			}
			if err := enc.Encode(good(21)); err != nil {
				t.Fatalf("%s: Encode after a record error: %v", name, err)
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			var rows []map[string]any
			if typ == "avro" {
				rows = formattest.ReadAvroGo(t, buf.Bytes())
			} else {
				rows = formattest.ReadParquetGo(t, buf.Bytes(), tc.encoding == "none")
			}
			var offsets []string
			for _, r := range rows {
				offsets = append(offsets, fmt.Sprint(r["offset"]))
			}
			if got := strings.Join(offsets, ","); got != "1,21" {
				t.Errorf("%s: file holds offsets %s, want 1,21", name, got)
			}
		}
	}
}

func TestNewEncoderErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  config.Format
		want string
	}{
		{config.Format{Type: "avro", Fields: []string{"key", "value"}}, "format.envelope: false writes one field"},
		{config.Format{Type: "avro", Fields: formattest.AllFields(), Envelope: true, Compression: "lz4"}, `format.compression "lz4" is unknown`},
		{config.Format{Type: "parquet", Fields: []string{"value", "value"}, Envelope: true}, `field "value" is listed twice`},
		{config.Format{Type: "parquet", Fields: formattest.AllFields(), Envelope: true, ValueEncoding: "hex"}, `format.value_encoding "hex" is unknown`},
		{config.Format{Type: "xml", Fields: formattest.AllFields(), Envelope: true}, `format.type "xml" is unknown`},
		{config.Format{Type: "jsonl", Envelope: true}, "format.fields is empty"},
		{config.Format{Type: "jsonl", Fields: []string{"value", "topic"}, Envelope: true}, `unknown field "topic"`},
		{config.Format{Type: "jsonl", Fields: []string{"value", "value"}, Envelope: true}, `field "value" is listed twice`},
		{config.Format{Type: "jsonl", Fields: []string{"key", "value"}}, "format.envelope: false writes one bare field"},
		{config.Format{Type: "jsonl", Fields: formattest.AllFields(), Envelope: true, ValueEncoding: "hex"}, `format.value_encoding "hex" is unknown`},
	} {
		_, err := NewEncoder(tc.cfg, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewEncoder(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
