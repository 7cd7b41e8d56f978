package jsonfmt

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// writeFile encodes recs as the sink chains this package's encoders.
func writeFile(t *testing.T, dir string, cfg config.Format, recs []*kgo.Record) string {
	t.Helper()
	encode := func(c config.Format, w io.Writer) (formattest.Encoder, error) { return newEncoder(c, w) }
	return formattest.WriteFile(t, formattest.Chain{Compress: format.NewCompressor, Encode: encode}, dir, cfg, recs)
}

// TestTextFormatsReadByDuckDB writes jsonl and json files in every
// compression and reads each back with DuckDB, a reader nobody here
// wrote: exact row counts and every field's value. Snappy files are
// decompressed by python3-snappy first (DuckDB reads no snappy framing).
func TestTextFormatsReadByDuckDB(t *testing.T) {
	duck := outside.NewDuckDB(t)
	const n = 400
	withLines := formattest.ReaderRecords(n, true)
	dir := t.TempDir()

	type check func(t *testing.T, rows []outside.Row)
	var (
		names   []string
		queries []string
		checks  []check
	)
	for _, comp := range formattest.Compressions() {
		base := config.Format{Fields: formattest.AllFields(), ValueEncoding: "none", Envelope: true, Compression: comp, BytesSeparator: config.DefaultBytesSeparator}

		for _, typ := range []string{"jsonl", "json"} {
			cfg := base
			cfg.Type = typ
			p := formattest.DuckPath(t, writeFile(t, dir, cfg, withLines))
			layout := "newline_delimited"
			if typ == "json" {
				layout = "array"
			}
			names = append(names, typ+"/"+comp)
			queries = append(queries, fmt.Sprintf(`SELECT key, value, "offset", "timestamp", headers FROM read_json(%s, format='%s',
				columns={'key': 'VARCHAR', 'value': 'JSON', 'offset': 'BIGINT', 'timestamp': 'BIGINT', 'headers': 'STRUCT(key VARCHAR, value VARCHAR)[]'})`,
				outside.SQLString(p), layout))
			checks = append(checks, func(t *testing.T, rows []outside.Row) { checkJSONRows(t, rows, withLines) })
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

func checkJSONRows(t *testing.T, rows []outside.Row, recs []*kgo.Record) {
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
