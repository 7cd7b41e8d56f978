package avro

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
	"github.com/spillway/spillway/internal/testkit/outside"
)

var avroCodecNames = map[string]string{"none": "null", "gzip": "deflate", "snappy": "snappy", "zstd": "zstandard"}

// TestAvroPythonReads writes every case and reads it back with Debian's
// python3-avro: exact rows, the writer schema with its logical type, and
// the codec.
func TestAvroPythonReads(t *testing.T) {
	outside.PythonAvro(t)
	dir := t.TempDir()
	cases := formattest.ColumnarCases("avro")
	var paths []string
	for _, c := range cases {
		paths = append(paths, writeColumnar(t, dir, c.Name+".avro", c.Cfg, c.Recs))
	}
	files := outside.ReadAvroPython(t, paths...)
	for i, c := range cases {
		f := files[i]
		want := formattest.WantRows(t, c.Cfg, c.Recs, func(b []byte) any { return map[string]any{"b64": formattest.B64(string(b))} })
		formattest.CheckRows(t, c.Name, formattest.JSONForm(t, f.Records), want)
		if got, want := f.Codec, avroCodecNames[c.Cfg.Compression]; got != want {
			t.Errorf("%s: codec %q, want %q", c.Name, got, want)
		}
		var schema struct {
			Type, Name, Namespace string
			Fields                []struct {
				Name string
				Type json.RawMessage
			}
		}
		if err := json.Unmarshal(f.Schema, &schema); err != nil {
			t.Fatalf("%s: schema %s: %v", c.Name, f.Schema, err)
		}
		if schema.Type != "record" || schema.Name != "connector_records" || schema.Namespace != "spillway" {
			t.Errorf("%s: schema %s is not the record spillway.connector_records", c.Name, f.Schema)
		}
		var names []string
		for _, fl := range schema.Fields {
			names = append(names, fl.Name)
		}
		if !reflect.DeepEqual(names, c.Cfg.Fields) {
			t.Errorf("%s: schema fields %v, want %v", c.Name, names, c.Cfg.Fields)
		}
		// The reader saw the logical type: a datetime, not a bare long.
		if _, ok := f.Types["timestamp"]; ok && f.Types["timestamp"] != "datetime" {
			t.Errorf("%s: timestamp decoded as %s, want datetime (timestamp-millis)", c.Name, f.Types["timestamp"])
		}
		if v, ok := f.Types["value"]; ok {
			want := map[bool]string{true: "str", false: "bytes"}[c.Cfg.ValueEncoding == "none"]
			if v != want {
				t.Errorf("%s: value decoded as %s, want %s", c.Name, v, want)
			}
		}
	}
	// One schema in full, as a user's reader would see it.
	wantSchema := `{"type":"record","name":"connector_records","namespace":"spillway","fields":[` +
		`{"name":"key","type":["null","string"]},{"name":"value","type":["null","string"]},{"name":"offset","type":"long"},` +
		`{"name":"timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},` +
		`{"name":"headers","type":{"type":"array","items":{"type":"record","name":"header","fields":[{"name":"key","type":"string"},{"name":"value","type":["null","string"]}]}}}]}`
	if got := compactJSON(t, files[0].Schema); got != compactJSON(t, []byte(wantSchema)) {
		t.Errorf("writer schema\n got  %s\n want %s", got, wantSchema)
	}
}

// TestAvroGoReads reads every case back with twmb/avro's own OCF reader,
// which needs no tool installed.
func TestAvroGoReads(t *testing.T) {
	for _, c := range formattest.ColumnarCases("avro") {
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
		rows := formattest.ReadAvroGo(t, buf.Bytes())
		want := formattest.WantRows(t, c.Cfg, c.Recs, func(b []byte) any { return formattest.B64(string(b)) })
		formattest.CheckRows(t, c.Name, formattest.JSONForm(t, rows), want)
	}
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return buf.String()
}

var fixedSync = [16]byte{'s', 'p', 'i', 'l', 'l', 'w', 'a', 'y', '-', 's', 'y', 'n', 'c', '-', '1', '6'}

// TestAvroGolden pins the exact bytes of a file on fixed input (the sync
// marker, random in real files, is fixed here).
func TestAvroGolden(t *testing.T) {
	for _, comp := range []string{"none", "snappy"} {
		var buf bytes.Buffer
		enc, err := newAvroEncoder(formattest.ColumnarConfig("avro", comp, "none"), &buf, fixedSync, format.Memory{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range formattest.ColumnarRecords(false) {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		formattest.Golden(t, "envelope-"+comp+".avro", buf.Bytes())
	}
}

// avroBlock is one block of an OCF as framed on disk.
type avroBlock struct {
	count, size int64
}

// avroBlocks parses the block framing of an uncompressed OCF whose header
// is hdrLen bytes, checking every sync marker.
func avroBlocks(t *testing.T, file []byte, hdrLen int, sync [16]byte) []avroBlock {
	t.Helper()
	var blocks []avroBlock
	rest := file[hdrLen:]
	for len(rest) > 0 {
		count, n := binary.Varint(rest)
		size, m := binary.Varint(rest[n:])
		if n <= 0 || m <= 0 || int64(len(rest)) < int64(n+m)+size+16 {
			t.Fatalf("block %d: bad framing", len(blocks))
		}
		rest = rest[int64(n+m)+size:]
		if !bytes.Equal(rest[:16], sync[:]) {
			t.Fatalf("block %d: sync marker %q, want %q", len(blocks), rest[:16], sync)
		}
		rest = rest[16:]
		blocks = append(blocks, avroBlock{count, size})
	}
	return blocks
}

// TestAvroBlocksCutByBytes writes ~2 MiB of 1 KiB records and a 3 MiB
// record: blocks go out as the encoded bytes reach avroBlockBytes (not by
// count, and not only at Close), the large record is a block of its own,
// and its buffer is not kept.
func TestAvroBlocksCutByBytes(t *testing.T) {
	var buf bytes.Buffer
	cfg := formattest.ColumnarConfig("avro", "none", "none")
	enc, err := newAvroEncoder(cfg, &buf, fixedSync, format.Memory{})
	if err != nil {
		t.Fatal(err)
	}
	hdrLen := buf.Len()
	value := bytes.Repeat([]byte("x"), 1000)
	var recs []*kgo.Record
	for i := range 2000 {
		recs = append(recs, &kgo.Record{Offset: int64(i), Timestamp: formattest.TS, Value: value})
	}
	big := &kgo.Record{Offset: 2000, Timestamp: formattest.TS, Value: bytes.Repeat([]byte("y"), 3<<20)}
	recs = append(recs, big, &kgo.Record{Offset: 2001, Timestamp: formattest.TS, Value: value})
	written := 0
	for i, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		if i == 999 {
			written = buf.Len() - hdrLen
		}
		if r == big && enc.block != nil {
			t.Errorf("after a %d B record the block buffer (cap %d) was kept", len(big.Value), cap(enc.block))
		}
	}
	// ~1 MiB encoded by then: all but the open block is out.
	if written < 1000*1010-avroBlockBytes {
		t.Errorf("after 1000 records of 1 KiB only %d B were written: blocks are not cut by bytes", written)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	blocks := avroBlocks(t, buf.Bytes(), hdrLen, fixedSync)
	var total int64
	for i, b := range blocks {
		total += b.count
		last := i == len(blocks)-1
		switch {
		case b.size > 3<<20+64: // the large record's block
			t.Errorf("block %d: %d B", i, b.size)
		case b.size > 3<<20 && b.count != 1:
			t.Errorf("the large record shares its block with %d others", b.count-1)
		case b.size < 3<<20 && b.size > avroBlockBytes+1100:
			t.Errorf("block %d: %d B, want at most a block (%d B) and one record", i, b.size, avroBlockBytes)
		case b.size < 3<<20 && b.size < avroBlockBytes && !last && blocks[i+1].size < 3<<20:
			t.Errorf("block %d: %d B cut before the threshold (%d B)", i, b.size, avroBlockBytes)
		}
	}
	if total != int64(len(recs)) {
		t.Errorf("blocks hold %d records, want %d", total, len(recs))
	}
	rows := formattest.ReadAvroGo(t, buf.Bytes())
	for i, row := range rows {
		if row["offset"] != int64(i) {
			t.Fatalf("row %d has offset %v", i, row["offset"])
		}
	}
}

// headerFailWriter takes the header, then fails every write.
type headerFailWriter struct {
	err    error
	open   bool
	writes int
}

func (w *headerFailWriter) Write(p []byte) (int, error) {
	if w.open {
		w.writes++
		return 0, w.err
	}
	w.open = true
	return len(p), nil
}

func TestAvroWriteErrorIsNotRecordError(t *testing.T) {
	boom := errors.New("disk on fire")
	w := &headerFailWriter{err: boom}
	enc, err := Kind().NewEncoder(formattest.ColumnarConfig("avro", "zstd", "none"), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&kgo.Record{Value: []byte("v")}); err != nil {
		t.Fatalf("Encode into the open block: %v", err)
	}
	err = enc.Close()
	if !errors.Is(err, boom) || errors.Is(err, format.ErrRecord) {
		t.Fatalf("Close = %v, want the writer's error, not ErrRecord", err)
	}
	if err := enc.Encode(&kgo.Record{Value: []byte("v")}); !errors.Is(err, boom) {
		t.Errorf("Encode after the failure = %v, want the first error", err)
	}
	if err := enc.Close(); !errors.Is(err, boom) {
		t.Errorf("second Close = %v, want the first error", err)
	}
	if w.writes != 1 {
		t.Errorf("%d writes after the failure, want 1 in all", w.writes)
	}
}
