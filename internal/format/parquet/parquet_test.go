package parquet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
	"github.com/spillway/spillway/internal/testkit/outside"
)

func encodeParquet(t *testing.T, c formattest.ColumnarCase) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := Kind().NewEncoder(c.Cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParquetGoReads reads every case back with parquet-go's reader, and
// checks the schema's column order, logical types and codec.
func TestParquetGoReads(t *testing.T) {
	codecs := map[string]pqformat.CompressionCodec{"none": pqformat.Uncompressed, "gzip": pqformat.Gzip, "snappy": pqformat.Snappy, "zstd": pqformat.Zstd}
	for _, c := range formattest.ColumnarCases("parquet") {
		b := encodeParquet(t, c)
		want := formattest.WantRows(t, c.Cfg, c.Recs, func(b []byte) any { return formattest.B64(string(b)) })
		formattest.CheckRows(t, c.Name, formattest.ReadParquetGo(t, b, c.Cfg.ValueEncoding == "none"), want)

		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, fl := range f.Schema().Fields() {
			names = append(names, fl.Name())
		}
		if !reflect.DeepEqual(names, c.Cfg.Fields) {
			t.Errorf("%s: columns %v, want %v in that order", c.Name, names, c.Cfg.Fields)
		}
		for _, rg := range f.Metadata().RowGroups {
			for _, cc := range rg.Columns {
				if cc.MetaData.Codec != codecs[c.Cfg.Compression] {
					t.Errorf("%s: column %v has codec %v, want %v", c.Name, cc.MetaData.PathInSchema, cc.MetaData.Codec, codecs[c.Cfg.Compression])
				}
			}
		}
		for _, el := range f.Schema().Fields() {
			var lt string
			if l := el.Type().LogicalType(); l != nil {
				lt = l.String()
			}
			var want string
			switch el.Name() {
			case "timestamp":
				want = "TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS)"
			case "key", "value":
				want = map[string]string{"none": "STRING", "base64": ""}[c.Cfg.ValueEncoding]
			case "headers":
				want = "LIST"
			default:
				continue
			}
			if lt != want {
				t.Errorf("%s: %s has logical type %q, want %q", c.Name, el.Name(), lt, want)
			}
		}
	}
}

// TestParquetGolden pins the exact bytes of an uncompressed file on fixed
// input.
func TestParquetGolden(t *testing.T) {
	formattest.Golden(t, "envelope-none.parquet", encodeParquet(t, formattest.ColumnarCase{Cfg: formattest.ColumnarConfig("parquet", "none", "none"), Recs: formattest.ColumnarRecords(false)}))
}

// TestParquetRowGroupsCutByBytes writes some 20 MiB of values: row groups
// go out as the open one reaches parquetRowGroupBytes, not only at Close,
// and each stays near that size.
func TestParquetRowGroupsCutByBytes(t *testing.T) {
	var buf bytes.Buffer
	enc, err := Kind().NewEncoder(formattest.ColumnarConfig("parquet", "none", "none"), &buf)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 1000)
	const n = 20_000
	var maxHeld int64
	for i := range n {
		if err := enc.Encode(&kgo.Record{Offset: int64(i), Timestamp: formattest.TS, Key: []byte("k"), Value: value}); err != nil {
			t.Fatal(err)
		}
		// What the encoder holds is what it took in minus what it wrote.
		pe := enc.(*parquetEncoder)
		maxHeld = max(maxHeld, pe.w.Size()-int64(buf.Len()))
	}
	if limit := int64(parquetRowGroupBytes + parquetPageBytes); maxHeld > limit {
		t.Errorf("the encoder held up to %d B, want at most a row group and a page (%d B)", maxHeld, limit)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	rgs := f.Metadata().RowGroups
	if want := n * 1000 / parquetRowGroupBytes; len(rgs) < want {
		t.Errorf("%d row groups, want at least %d", len(rgs), want)
	}
	var rows int64
	for i, rg := range rgs {
		rows += rg.NumRows
		if rg.TotalByteSize > parquetRowGroupBytes+parquetPageBytes {
			t.Errorf("row group %d: %d B", i, rg.TotalByteSize)
		}
	}
	if rows != n {
		t.Errorf("%d rows, want %d", rows, n)
	}
}

func TestParquetWriteErrorIsNotRecordError(t *testing.T) {
	boom := errors.New("disk on fire")
	w := &failWriter{err: boom}
	enc, err := Kind().NewEncoder(formattest.ColumnarConfig("parquet", "zstd", "none"), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&kgo.Record{Value: []byte("v")}); err != nil {
		t.Fatalf("Encode into the open row group: %v", err)
	}
	err = enc.Close()
	if !errors.Is(err, boom) || errors.Is(err, format.ErrRecord) {
		t.Fatalf("Close = %v, want the writer's error, not ErrRecord", err)
	}
	if err := enc.Encode(&kgo.Record{Value: []byte("v")}); !errors.Is(err, boom) {
		t.Errorf("Encode after the failure = %v, want the first error", err)
	}
}

// TestParquetDuckDBReads reads every case with DuckDB: exact rows, the
// column types DESCRIBE shows, and each column chunk's codec.
func TestParquetDuckDBReads(t *testing.T) {
	db := outside.NewDuckDB(t)
	dir := t.TempDir()
	cases := formattest.ColumnarCases("parquet")
	var queries []string
	for _, c := range cases {
		path := filepath.Join(dir, c.Name+".parquet")
		if err := os.WriteFile(path, encodeParquet(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
		// Bytes as base64 and numbers as doubles, so that rows come back
		// as plain JSON.
		blob := func(col string) string {
			if c.Cfg.ValueEncoding == "base64" {
				return "to_base64(" + col + ")"
			}
			return col
		}
		var cols []string
		for _, f := range c.Cfg.Fields {
			switch f {
			case "key", "value":
				cols = append(cols, blob(`"`+f+`"`)+` AS "`+f+`"`)
			case "offset":
				cols = append(cols, `"offset"::DOUBLE AS "offset"`)
			case "partition":
				cols = append(cols, `"partition"::DOUBLE AS "partition"`)
			case "timestamp":
				cols = append(cols, `epoch_ms("timestamp")::DOUBLE AS "timestamp"`)
			case "headers":
				cols = append(cols, `list_transform(headers, h -> {'key': h.key, 'value': `+blob("h.value")+`}) AS headers`)
			}
		}
		queries = append(queries,
			fmt.Sprintf("SELECT %s FROM read_parquet(%s)", strings.Join(cols, ", "), outside.SQLString(path)),
			fmt.Sprintf("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(%s))", outside.SQLString(path)),
			fmt.Sprintf("SELECT DISTINCT compression FROM parquet_metadata(%s)", outside.SQLString(path)),
		)
	}
	res := db.Query(t, queries...)
	codecs := map[string]string{"none": "UNCOMPRESSED", "gzip": "GZIP", "snappy": "SNAPPY", "zstd": "ZSTD"}
	for i, c := range cases {
		rows, describe, meta := res[3*i], res[3*i+1], res[3*i+2]
		want := formattest.WantRows(t, c.Cfg, c.Recs, func(b []byte) any { return formattest.B64(string(b)) })
		formattest.CheckRows(t, c.Name, formattest.JSONForm(t, rows), want)

		blob := map[string]string{"none": "VARCHAR", "base64": "BLOB"}[c.Cfg.ValueEncoding]
		wantTypes := map[string]string{
			"key": blob, "value": blob, "offset": "BIGINT", "timestamp": "TIMESTAMP WITH TIME ZONE", "partition": "INTEGER",
			"headers": `STRUCT("key" VARCHAR, "value" ` + blob + `)[]`,
		}
		var names []string
		for _, d := range describe {
			name := fmt.Sprint(d["column_name"])
			names = append(names, name)
			if got := fmt.Sprint(d["column_type"]); got != wantTypes[name] {
				t.Errorf("%s: DESCRIBE %s is %s, want %s", c.Name, name, got, wantTypes[name])
			}
		}
		if !reflect.DeepEqual(names, c.Cfg.Fields) {
			t.Errorf("%s: DESCRIBE columns %v, want %v", c.Name, names, c.Cfg.Fields)
		}
		if len(c.Recs) == 0 {
			if len(meta) != 0 {
				t.Errorf("%s: parquet_metadata %v, want no column chunks", c.Name, meta)
			}
		} else if len(meta) != 1 || meta[0]["compression"] != codecs[c.Cfg.Compression] {
			t.Errorf("%s: parquet_metadata codecs %v, want only %s", c.Name, meta, codecs[c.Cfg.Compression])
		}
	}
}

// TestMicros: with config.Format.Micros (set with iceberg.table), the
// envelope timestamp is TIMESTAMP(MICROS), Iceberg's unit, and holds
// microseconds; without it, milliseconds as before.
func TestMicros(t *testing.T) {
	t.Parallel()
	c := formattest.ColumnarCases("parquet")[0]
	at := time.Date(2026, 12, 5, 13, 4, 5, 123456000, time.UTC)
	c.Recs = []*kgo.Record{{Topic: "t", Offset: 7, Timestamp: at, Value: []byte("v")}}
	c.Cfg.Fields = []string{"offset", "timestamp"}
	for _, micros := range []bool{false, true} {
		c.Cfg.Micros = micros
		b := encodeParquet(t, c)
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		col, ok := f.Schema().Lookup("timestamp")
		if !ok {
			t.Fatal("no timestamp column")
		}
		lt := col.Node.Type().LogicalType()
		want, wantV := "MILLIS", at.UnixMilli()
		if micros {
			want, wantV = "MICROS", at.UnixMicro()
		}
		ts, ok := lt.Value.(*pqformat.TimestampType)
		if !ok || ts.Unit.String() != want {
			t.Errorf("micros %v: timestamp's logical type %v, want unit %v", micros, lt, want)
		}
		rows := make([]parquet.Row, 1)
		n, _ := f.RowGroups()[0].Rows().ReadRows(rows)
		if n != 1 || rows[0][col.ColumnIndex].Int64() != wantV {
			t.Errorf("micros %v: timestamp %v, want %d", micros, rows[0], wantV)
		}
	}
}
