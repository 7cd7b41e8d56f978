package formattest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro/ocf"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format/formatopts"
)

// ReadAvroGo decodes an OCF into rows, with bytes as base64 strings (as
// encoding/json writes []byte) and timestamps as milliseconds.
func ReadAvroGo(t *testing.T, file []byte) []map[string]any {
	t.Helper()
	r, err := ocf.NewReader(bytes.NewReader(file), ocf.WithMaxDecompressedBlockBytes(64<<20))
	if err != nil {
		t.Fatalf("ocf.NewReader: %v", err)
	}
	defer r.Close()
	var rows []map[string]any
	for {
		var m map[string]any
		if err := r.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("ocf decode: %v", err)
		}
		for k, v := range m {
			if tm, ok := v.(time.Time); ok {
				m[k] = tm.UnixMilli()
			}
		}
		rows = append(rows, m)
	}
	return rows
}

// ReadParquetGo reads a parquet file with parquet-go's reader into rows of
// the columns the file has, in the form of wantRows with base64 blobs.
func ReadParquetGo(t *testing.T, b []byte, text bool) []map[string]any {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("parquet.OpenFile: %v", err)
	}
	r := parquet.NewGenericReader[pqRow](f)
	defer r.Close()
	recs := make([]pqRow, f.NumRows())
	if n, err := r.Read(recs); n != len(recs) || (err != nil && err != io.EOF) {
		t.Fatalf("parquet read: %d of %d rows: %v", n, len(recs), err)
	}
	val := func(b *[]byte) any {
		switch {
		case b == nil:
			return nil
		case text:
			return string(*b)
		}
		return B64(string(*b))
	}
	var rows []map[string]any
	for _, rec := range recs {
		row := map[string]any{}
		for _, fl := range f.Schema().Fields() {
			switch fl.Name() {
			case "key":
				row["key"] = val(rec.Key)
			case "value":
				row["value"] = val(rec.Value)
			case "offset":
				row["offset"] = rec.Offset
			case "timestamp":
				row["timestamp"] = rec.Timestamp
			case "partition":
				row["partition"] = rec.Partition
			case "headers":
				hs := []any{}
				for _, h := range rec.Headers {
					hs = append(hs, map[string]any{"key": h.Key, "value": val(h.Value)})
				}
				row["headers"] = hs
			}
		}
		rows = append(rows, row)
	}
	return JSONForm(t, rows)
}

// pqRow and pqHeader read the envelope back with parquet-go; bytes are
// []byte whatever the logical type, so that binary values compare exactly.
type pqRow struct {
	Key       *[]byte    `parquet:"key,optional"`
	Value     *[]byte    `parquet:"value,optional"`
	Offset    int64      `parquet:"offset"`
	Timestamp int64      `parquet:"timestamp"`
	Headers   []pqHeader `parquet:"headers,list"`
	Partition *int32     `parquet:"partition,optional"`
}

type pqHeader struct {
	Key   string  `parquet:"key"`
	Value *[]byte `parquet:"value,optional"`
}

func JSONLConfig(enc string) formatopts.Options {
	return formatopts.Options{Type: "jsonl", Fields: AllFields(), ValueEncoding: enc, Envelope: true}
}

func DecodeLines(t *testing.T, out string) []Line {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end in a newline: %q", out)
	}
	var lines []Line
	for _, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		var l Line
		if err := d.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// Line is one decoded envelope. Pointers and RawMessage tell null from
// absent and a JSON string from embedded JSON.
type Line struct {
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
	Offset    *int64          `json:"offset"`
	Timestamp *int64          `json:"timestamp"`
	Headers   []struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"headers"`
}

// BenchRecord is a typical record with a 1 KiB value.
func BenchRecord(value []byte) *kgo.Record {
	return &kgo.Record{
		Topic: "events", Partition: 3, Offset: 123456789, Timestamp: TS,
		Key:     []byte("user-1234567"),
		Value:   value,
		Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte("4bf92f3577b34da6a3ce929d0e0e4736")}},
	}
}

func JSONValue(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < n-40; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item-%d"}`, i, i)
	}
	b.WriteString(`],"ok":true}`)
	return []byte(b.String())
}
