package format

import (
	"bytes"
	"encoding/base64"
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
	zw, err := NewCompressor(cfg.Compression, f)
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

// TestTextFormatsReadByDuckDB writes csv and bytes files in every
// compression and reads each back with DuckDB, a reader nobody here
// wrote: exact row counts and every field's value. Snappy files are
// decompressed by python3-snappy first (DuckDB reads no snappy framing).
func TestTextFormatsReadByDuckDB(t *testing.T) {
	duck := testkit.NewDuckDB(t)
	const n = 400
	withLines, oneLine := readerRecords(n, true), readerRecords(n, false)
	dir := t.TempDir()

	type check func(t *testing.T, rows []testkit.Row)
	var (
		names   []string
		queries []string
		checks  []check
	)
	for _, comp := range compressionKinds {
		base := config.Format{Fields: allFields, ValueEncoding: "none", Envelope: true, Compression: comp, BytesSeparator: config.DefaultBytesSeparator}

		cfg := base
		cfg.Type = "csv"
		p := duckPath(t, writeFile(t, dir, cfg, withLines))
		names = append(names, "csv/"+comp)
		// auto_detect=false: the dialect is given, so nothing is guessed (the
		// sniffer would skip a leading empty line); allow_quoted_nulls=false
		// reads "" as an empty string and an empty field as NULL.
		queries = append(queries, fmt.Sprintf(`SELECT * FROM read_csv(%s, header=false, auto_detect=false, delim=',', quote='"', escape='"', new_line='\n', allow_quoted_nulls=false,
			columns={'key': 'VARCHAR', 'value': 'VARCHAR', 'offset': 'BIGINT', 'timestamp': 'BIGINT', 'headers': 'VARCHAR'})`, testkit.SQLString(p)))
		checks = append(checks, func(t *testing.T, rows []testkit.Row) { checkCSVRows(t, rows, withLines) })

		cfg = base
		cfg.Type = "bytes"
		p = duckPath(t, writeFile(t, dir, cfg, oneLine))
		names = append(names, "bytes/"+comp)
		// One value per line: no delimiter or quote that a value holds.
		queries = append(queries, fmt.Sprintf(`SELECT * FROM read_csv(%s, header=false, auto_detect=false, delim='\t', quote='', escape='', new_line='\n',
			columns={'value': 'VARCHAR'})`, testkit.SQLString(p)))
		checks = append(checks, func(t *testing.T, rows []testkit.Row) { checkBytesRows(t, rows, oneLine) })
	}
	results := duck.Query(t, queries...)
	for i, rows := range results {
		t.Run(names[i], func(t *testing.T) { checks[i](t, rows) })
	}
}

func checkCSVRows(t *testing.T, rows []testkit.Row, recs []*kgo.Record) {
	if len(rows) != len(recs) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows), len(recs))
	}
	for i, r := range recs {
		row := rows[i]
		want := testkit.Row{
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

func checkBytesRows(t *testing.T, rows []testkit.Row, recs []*kgo.Record) {
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
		cfg := config.Format{Type: "bytes", Fields: []string{"value"}, BytesSeparator: sep}
		real, err := cfg.Separator()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want = append(append(want, r.Value...), real...)
		}
		for _, comp := range compressionKinds {
			cfg.Compression = comp
			sub := filepath.Join(dir, strconv.Itoa(i)+"-"+comp)
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			got := testkit.Decompress(t, writeFile(t, sub, cfg, recs))
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
