package formats

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro/ocf"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format/formattest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readAvroGo decodes an OCF into rows, with bytes as base64 strings (as
// encoding/json writes []byte) and timestamps as milliseconds.
func readAvroGo(t *testing.T, file []byte) []map[string]any {
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

var fixedSync = [16]byte{'s', 'p', 'i', 'l', 'l', 'w', 'a', 'y', '-', 's', 'y', 'n', 'c', '-', '1', '6'}

// syncOf is an avro file's sync marker: its last 16 bytes.
func syncOf(file []byte) [16]byte {
	var s [16]byte
	copy(s[:], file[len(file)-16:])
	return s
}

// readParquetGo reads a parquet file with parquet-go's reader into rows of
// the columns the file has, in the form of wantRows with base64 blobs.
func readParquetGo(t *testing.T, b []byte, text bool) []map[string]any {
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
		return formattest.B64(string(*b))
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
	return formattest.JSONForm(t, rows)
}

// pqRow and pqHeader read the envelope back with parquet-go; bytes are
// []byte whatever the logical type, so that binary values compare exactly.
type pqRow struct {
	Key       *[]byte    `parquet:"key,optional"`
	Value     *[]byte    `parquet:"value,optional"`
	Offset    int64      `parquet:"offset"`
	Timestamp int64      `parquet:"timestamp"`
	Headers   []pqHeader `parquet:"headers,list"`
}

type pqHeader struct {
	Key   string  `parquet:"key"`
	Value *[]byte `parquet:"value,optional"`
}

func jsonlConfig(enc string) config.Format {
	return config.Format{Type: "jsonl", Fields: formattest.AllFields(), ValueEncoding: enc, Envelope: true}
}

func decodeLines(t *testing.T, out string) []line {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end in a newline: %q", out)
	}
	var lines []line
	for _, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		var l line
		if err := d.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// line is one decoded envelope. Pointers and RawMessage tell null from
// absent and a JSON string from embedded JSON.
type line struct {
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
	Offset    *int64          `json:"offset"`
	Timestamp *int64          `json:"timestamp"`
	Headers   []struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"headers"`
}

// withSync is an avro file with its sync marker, random and not
// settable from outside the avro package, replaced by sync: the marker
// is the file's last 16 bytes and recurs only after the header and each
// block, so the result is the file an encoder given sync writes, for the
// golden files.
func withSync(file []byte, sync [16]byte) []byte {
	old := syncOf(file)
	return bytes.ReplaceAll(file, old[:], sync[:])
}
