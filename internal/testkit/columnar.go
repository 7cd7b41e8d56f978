package testkit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro/ocf"
)

// ReadAvro reads every file under root (as WalkOutput lists them) as an
// Avro container file written with the envelope schema and the default
// file name template, with twmb/avro's reader, and returns their records in
// walk order. Key, value and header values are JSON: a string for string
// columns, base64 in a string for bytes, null. A file that does not read
// fails the test.
func ReadAvro(t testing.TB, root string) []StoredRecord {
	t.Helper()
	return readFiles(t, root, "ReadAvro", readAvroFile)
}

// ReadParquet is ReadAvro for Parquet files, read with parquet-go.
func ReadParquet(t testing.TB, root string) []StoredRecord {
	t.Helper()
	return readFiles(t, root, "ReadParquet", readParquetFile)
}

func readFiles(t testing.TB, root, name string, read func(path string, data []byte) ([]StoredRecord, error)) []StoredRecord {
	t.Helper()
	var out []StoredRecord
	err := WalkOutput(root, func(path string) error {
		topic, partition, _, ok := ParseDefaultName(path)
		if !ok {
			return fmt.Errorf("%s: name does not match {{topic}}-{{partition}}-{{start_offset}}[.ext...]", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		recs, err := read(path, data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for i := range recs {
			recs[i].File, recs[i].Line, recs[i].Topic, recs[i].Partition = path, i+1, topic, partition
		}
		out = append(out, recs...)
		return nil
	})
	if err != nil {
		t.Fatalf("testkit.%s(%s): %v", name, root, err)
	}
	return out
}

// jsonBlob is a key, value or header value as StoredRecord holds it.
func jsonBlob(v any) json.RawMessage {
	var b []byte
	switch v := v.(type) {
	case nil:
		return json.RawMessage("null")
	case string:
		b, _ = json.Marshal(v)
	case []byte:
		b, _ = json.Marshal(base64.StdEncoding.EncodeToString(v))
	default:
		b, _ = json.Marshal(v)
	}
	return b
}

func readAvroFile(_ string, data []byte) ([]StoredRecord, error) {
	r, err := ocf.NewReader(bytes.NewReader(data), ocf.WithMaxDecompressedBlockBytes(256<<20))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []StoredRecord
	for {
		var m map[string]any
		if err := r.Decode(&m); err == io.EOF {
			return recs, nil
		} else if err != nil {
			return nil, err
		}
		off, ok := m["offset"].(int64)
		if !ok {
			return nil, fmt.Errorf("record %d has no long offset: %v", len(recs), m)
		}
		rec := StoredRecord{Offset: off, Key: jsonBlob(m["key"]), Value: jsonBlob(m["value"])}
		if ts, ok := m["timestamp"].(time.Time); ok {
			rec.Timestamp = ts.UnixMilli()
		}
		if hs, ok := m["headers"].([]any); ok {
			for _, h := range hs {
				hm, _ := h.(map[string]any)
				rec.Headers = append(rec.Headers, map[string]any{"key": hm["key"], "value": rawString(jsonBlob(hm["value"]))})
			}
		}
		recs = append(recs, rec)
	}
}

// rawString is a header value as the jsonl reader holds it: a string, or
// nil for null.
func rawString(b json.RawMessage) any {
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// parquetRow reads the envelope with parquet-go; bytes are []byte whatever
// the logical type.
type parquetRow struct {
	Key       *[]byte         `parquet:"key,optional"`
	Value     *[]byte         `parquet:"value,optional"`
	Offset    int64           `parquet:"offset"`
	Timestamp int64           `parquet:"timestamp"`
	Headers   []parquetHeader `parquet:"headers,list"`
}

type parquetHeader struct {
	Key   string  `parquet:"key"`
	Value *[]byte `parquet:"value,optional"`
}

func readParquetFile(_ string, data []byte) ([]StoredRecord, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	if _, ok := f.Schema().Lookup("offset"); !ok {
		return nil, fmt.Errorf("no offset column in %s", f.Schema())
	}
	text := func(col string) bool {
		leaf, ok := f.Schema().Lookup(col)
		if !ok {
			return false
		}
		lt := leaf.Node.Type().LogicalType()
		return lt != nil && lt.String() == "STRING"
	}
	textKey, textValue := text("key"), text("value")
	blob := func(b *[]byte, isText bool) any {
		switch {
		case b == nil:
			return nil
		case isText:
			return string(*b)
		}
		return *b
	}
	rows := make([]parquetRow, f.NumRows())
	r := parquet.NewGenericReader[parquetRow](f)
	defer r.Close()
	if n, err := r.Read(rows); n != len(rows) || (err != nil && err != io.EOF) {
		return nil, fmt.Errorf("read %d of %d rows: %v", n, len(rows), err)
	}
	recs := make([]StoredRecord, len(rows))
	for i, row := range rows {
		recs[i] = StoredRecord{Offset: row.Offset, Timestamp: row.Timestamp,
			Key: jsonBlob(blob(row.Key, textKey)), Value: jsonBlob(blob(row.Value, textValue))}
		for _, h := range row.Headers {
			recs[i].Headers = append(recs[i].Headers, map[string]any{"key": h.Key, "value": rawString(jsonBlob(blob(h.Value, textValue)))})
		}
	}
	return recs, nil
}
