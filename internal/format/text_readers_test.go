package format

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format/formattest"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// writeFile encodes recs as the sink chains this package's encoders.
func writeFile(t *testing.T, dir string, cfg Options, recs []*kgo.Record) string {
	t.Helper()
	encode := func(c Options, w io.Writer) (formattest.Encoder, error) { return newEncoder(c, w) }
	return formattest.WriteFile(t, formattest.Chain{Compress: NewCompressor, Encode: encode}, dir, cfg, recs)
}

// TestTextFormatsReadByDuckDB writes csv and bytes files in every
// compression and reads each back with DuckDB, a reader nobody here
// wrote: exact row counts and every field's value. Snappy files are
// decompressed by python3-snappy first (DuckDB reads no snappy framing).
func TestTextFormatsReadByDuckDB(t *testing.T) {
	duck := outside.NewDuckDB(t)
	const n = 400
	withLines, oneLine := formattest.ReaderRecords(n, true), formattest.ReaderRecords(n, false)
	dir := t.TempDir()

	type check func(t *testing.T, rows []outside.Row)
	var (
		names   []string
		queries []string
		checks  []check
	)
	for _, comp := range formattest.Compressions() {
		base := Options{Fields: formattest.AllFields(), ValueEncoding: "none", Envelope: true, Compression: comp, BytesSeparator: DefaultBytesSeparator}

		cfg := base
		cfg.Type = "csv"
		p := formattest.DuckPath(t, writeFile(t, dir, cfg, withLines))
		names = append(names, "csv/"+comp)
		// auto_detect=false: the dialect is given, so nothing is guessed (the
		// sniffer would skip a leading empty line); allow_quoted_nulls=false
		// reads "" as an empty string and an empty field as NULL.
		queries = append(queries, fmt.Sprintf(`SELECT * FROM read_csv(%s, header=false, auto_detect=false, delim=',', quote='"', escape='"', new_line='\n', allow_quoted_nulls=false,
			columns={'key': 'VARCHAR', 'value': 'VARCHAR', 'offset': 'BIGINT', 'timestamp': 'BIGINT', 'headers': 'VARCHAR'})`, outside.SQLString(p)))
		checks = append(checks, func(t *testing.T, rows []outside.Row) { checkCSVRows(t, rows, withLines) })

		cfg = base
		cfg.Type = "bytes"
		p = formattest.DuckPath(t, writeFile(t, dir, cfg, oneLine))
		names = append(names, "bytes/"+comp)
		// One value per line: no delimiter or quote that a value holds.
		queries = append(queries, fmt.Sprintf(`SELECT * FROM read_csv(%s, header=false, auto_detect=false, delim='\t', quote='', escape='', new_line='\n',
			columns={'value': 'VARCHAR'})`, outside.SQLString(p)))
		checks = append(checks, func(t *testing.T, rows []outside.Row) { checkBytesRows(t, rows, oneLine) })
	}
	results := duck.Query(t, queries...)
	for i, rows := range results {
		t.Run(names[i], func(t *testing.T) { checks[i](t, rows) })
	}
}

func checkCSVRows(t *testing.T, rows []outside.Row, recs []*kgo.Record) {
	if len(rows) != len(recs) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows), len(recs))
	}
	for i, r := range recs {
		row := rows[i]
		want := outside.Row{
			"key":       csvText(r.Key, true),
			"value":     csvText(r.Value, false),
			"offset":    strconv.FormatInt(r.Offset, 10),
			"timestamp": strconv.FormatInt(r.Timestamp.UnixMilli(), 10),
			"headers":   nil,
		}
		if len(r.Headers) > 0 {
			var h strings.Builder
			for _, x := range r.Headers {
				h.WriteString(base64.StdEncoding.EncodeToString([]byte(x.Key)) + ":" + base64.StdEncoding.EncodeToString(x.Value) + ";")
			}
			want["headers"] = h.String()
		}
		if !reflect.DeepEqual(row, want) {
			t.Fatalf("row %d (offset %d):\n got %#v\nwant %#v", i, r.Offset, row, want)
		}
	}
}

// csvText is what a csv field of b reads back as: NULL for null, else the
// text (base64 for a key).
func csvText(b []byte, b64 bool) any {
	switch {
	case b == nil:
		return nil
	case b64:
		return base64.StdEncoding.EncodeToString(b)
	}
	return string(b)
}

func checkBytesRows(t *testing.T, rows []outside.Row, recs []*kgo.Record) {
	if len(rows) != len(recs) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows), len(recs))
	}
	for i, r := range recs {
		// An empty line is NULL to DuckDB: an empty or a null value.
		var want any
		if len(r.Value) > 0 {
			want = string(r.Value)
		}
		if got := rows[i]["value"]; got != want {
			t.Fatalf("row %d: value %#v, want %#v", i, got, want)
		}
	}
}

// TestBytesReadByDecompressors: binary values, which no text reader takes,
// come back byte for byte through gzip -dc, zstd -dc and python3-snappy,
// with every separator kind.
func TestBytesReadByDecompressors(t *testing.T) {
	var recs []*kgo.Record
	var want []byte
	for i := range 300 {
		v := make([]byte, i%37)
		for j := range v {
			v[j] = byte(i*31 + j*7) // every byte value, CR and LF included
		}
		if i%50 == 0 {
			v = nil
		}
		recs = append(recs, &kgo.Record{Offset: int64(i), Value: v})
	}
	dir := t.TempDir()
	for i, sep := range []string{`\n`, `\r\n`, ``, `\x00\xff`} {
		want = want[:0]
		cfg := Options{Type: "bytes", Fields: []string{"value"}, BytesSeparator: sep}
		real, err := cfg.Separator()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want = append(append(want, r.Value...), real...)
		}
		for _, comp := range formattest.Compressions() {
			cfg.Compression = comp
			sub := filepath.Join(dir, strconv.Itoa(i)+"-"+comp)
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			got := outside.Decompress(t, writeFile(t, sub, cfg, recs))
			if !bytes.Equal(got, want) {
				t.Errorf("separator %q, %s: %d bytes read back, want %d (first difference at %d)", sep, comp, len(got), len(want), firstDiff(got, want))
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
