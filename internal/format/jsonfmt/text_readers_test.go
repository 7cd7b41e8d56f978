package jsonfmt

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/testkit"
)

var compressionKinds = []string{"none", "gzip", "zstd", "snappy"}

// readerRecords are n records with the shapes the text formats must carry:
// JSON objects, text that needs CSV quoting or JSON escapes, empty and null
// keys and values, headers with null values. Every value is UTF-8, and
// with lines=false none holds a line break or a tab, so that a bytes file
// splits into one value per line.
func readerRecords(n int, lines bool) []*kgo.Record {
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

// writeFile encodes recs through the format and compression of cfg, as the
// sink chains them, into dir, and returns the file's path.
func writeFile(t *testing.T, dir string, cfg config.Format, recs []*kgo.Record) string {
	t.Helper()
	path := filepath.Join(dir, cfg.Type+"-"+cfg.Compression+naming.Extension(cfg.Type, cfg.Compression))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw, err := format.NewCompressor(cfg.Compression, f)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newEncoder(cfg, zw)
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

// duckPath is where DuckDB reads a file from: DuckDB reads gzip and zstd
// itself but not snappy framing, which python3-snappy undoes first.
func duckPath(t *testing.T, path string) string {
	if strings.HasSuffix(path, ".snappy") {
		return testkit.Unsnappy(t, path)
	}
	return path
}

// TestTextFormatsReadByDuckDB writes jsonl and json files in every
// compression and reads each back with DuckDB, a reader nobody here
// wrote: exact row counts and every field's value. Snappy files are
// decompressed by python3-snappy first (DuckDB reads no snappy framing).
func TestTextFormatsReadByDuckDB(t *testing.T) {
	duck := testkit.NewDuckDB(t)
	const n = 400
	withLines := readerRecords(n, true)
	dir := t.TempDir()

	type check func(t *testing.T, rows []testkit.Row)
	var (
		names   []string
		queries []string
		checks  []check
	)
	for _, comp := range compressionKinds {
		base := config.Format{Fields: allFields, ValueEncoding: "none", Envelope: true, Compression: comp, BytesSeparator: config.DefaultBytesSeparator}

		for _, typ := range []string{"jsonl", "json"} {
			cfg := base
			cfg.Type = typ
			p := duckPath(t, writeFile(t, dir, cfg, withLines))
			layout := "newline_delimited"
			if typ == "json" {
				layout = "array"
			}
			names = append(names, typ+"/"+comp)
			queries = append(queries, fmt.Sprintf(`SELECT key, value, "offset", "timestamp", headers FROM read_json(%s, format='%s',
				columns={'key': 'VARCHAR', 'value': 'JSON', 'offset': 'BIGINT', 'timestamp': 'BIGINT', 'headers': 'STRUCT(key VARCHAR, value VARCHAR)[]'})`,
				testkit.SQLString(p), layout))
			checks = append(checks, func(t *testing.T, rows []testkit.Row) { checkJSONRows(t, rows, withLines) })
		}
	}
	results := duck.Query(t, queries...)
	for i, rows := range results {
		t.Run(names[i], func(t *testing.T) { checks[i](t, rows) })
	}
}

// duckString is a DuckDB VARCHAR: ok=false for NULL.
func duckString(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

func checkJSONRows(t *testing.T, rows []testkit.Row, recs []*kgo.Record) {
	if len(rows) != len(recs) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows), len(recs))
	}
	for i, r := range recs {
		row := rows[i]
		if k, ok := duckString(row["key"]); (r.Key == nil) != (row["key"] == nil) || r.Key != nil && (!ok || k != string(r.Key)) {
			t.Fatalf("row %d: key %#v, want %q", i, row["key"], r.Key)
		}
		if got, want := row["offset"], strconv.FormatInt(r.Offset, 10); got != want {
			t.Fatalf("row %d: offset %#v, want %s", i, got, want)
		}
		if got, want := row["timestamp"], strconv.FormatInt(r.Timestamp.UnixMilli(), 10); got != want {
			t.Fatalf("row %d: timestamp %#v, want %s", i, got, want)
		}
		// The value column is JSON text: an embedded document, or a string.
		var got, want any
		if r.Value != nil {
			want = string(r.Value)
			if json.Valid(r.Value) {
				if err := json.Unmarshal(r.Value, &want); err != nil {
					t.Fatal(err)
				}
			}
			s, ok := duckString(row["value"])
			if !ok || json.Unmarshal([]byte(s), &got) != nil {
				t.Fatalf("row %d: value %#v is not JSON text", i, row["value"])
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d: value %#v, want %#v", i, got, want)
		}
		hs, _ := row["headers"].([]any)
		if len(hs) != len(r.Headers) {
			t.Fatalf("row %d: headers %#v, want %d", i, row["headers"], len(r.Headers))
		}
		for j, h := range r.Headers {
			var wantV any
			if h.Value != nil {
				wantV = string(h.Value)
			}
			if got := hs[j].(map[string]any); got["key"] != h.Key || got["value"] != wantV {
				t.Fatalf("row %d: header %d = %#v, want %s=%q", i, j, got, h.Key, h.Value)
			}
		}
	}
}
