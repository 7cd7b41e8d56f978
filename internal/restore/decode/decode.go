// Package decode reads a stored data file back as the Kafka records it
// holds, byte for byte (key, value, headers, timestamp, null and empty
// apart, and the source offset), streaming, in every format restore
// accepts: jsonl and json with base64 values, avro, parquet.
package decode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/readback"
)

// File streams the records of the data file under key to fn, in
// file order, each whole: key, value, headers, timestamp, and its source
// offset in Offset. Nothing but the record at hand and the decoder's
// buffers (one line, one avro block, one parquet page) is held, so a file
// of any size restores in bounded memory; a parquet file, whose footer
// comes last, is first copied to a temporary file, as readback does. fn
// owns the record it is given. bufSize is the read buffer of the line
// formats: smaller when several files of a merge are open at once.
func File(ctx context.Context, st readback.Reader, key string, exts []string, bufSize int, fn func(*kgo.Record) error) error {
	rc, err := st.Read(ctx, key)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	defer rc.Close()
	r, ext, err := readback.Decompress(rc, exts)
	if err != nil {
		return &readback.ReadError{Key: key, Err: err}
	}
	defer r.Close()
	switch ext {
	case "jsonl":
		return decodeJSON(ctx, r, key, false, bufSize, fn)
	case "json":
		return decodeJSON(ctx, r, key, true, bufSize, fn)
	case "avro":
		return decodeAvro(ctx, r, key, fn)
	case "parquet":
		return decodeParquet(ctx, r, key, fn)
	}
	return &readback.UnsupportedError{Key: key, Why: fmt.Sprintf("restore can't read .%s files", ext)}
}

// jsonRecord is the envelope as jsonl and json write it with
// value_encoding base64: encoding/json reads a base64 string into a []byte
// and null into nil, and "" into an empty, non-nil slice, so null and
// empty stay apart.
type jsonRecord struct {
	Key       []byte       `json:"key"`
	Value     []byte       `json:"value"`
	Offset    *int64       `json:"offset"`
	Timestamp *int64       `json:"timestamp"`
	Headers   []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// jsonEnvelope reads a line with encoding/json: the way for a line that
// parseEnvelope's fast path does not take, and the judge of what it takes.
func jsonEnvelope(line []byte) (*kgo.Record, error) {
	var jr jsonRecord
	if err := json.Unmarshal(line, &jr); err != nil {
		return nil, fmt.Errorf("not a record: %w", err)
	}
	if jr.Offset == nil || jr.Timestamp == nil {
		return nil, errors.New("the record has no offset or no timestamp")
	}
	rec := &kgo.Record{Key: jr.Key, Value: jr.Value, Offset: *jr.Offset, Timestamp: time.UnixMilli(*jr.Timestamp)}
	if len(jr.Headers) > 0 {
		rec.Headers = make([]kgo.RecordHeader, len(jr.Headers))
		for i, h := range jr.Headers {
			rec.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return rec, nil
}

func decodeJSON(ctx context.Context, r io.Reader, key string, array bool, bufSize int, fn func(*kgo.Record) error) error {
	return readback.JSONLines(ctx, r, key, array, bufSize, func(n int64, line []byte, complete bool) error {
		if !complete {
			return &readback.ReadError{Key: key, Record: n, Err: errors.New("the file ends inside a record (no line break after it): it is truncated")}
		}
		rec, err := parseEnvelope(line)
		if err != nil {
			if rec, err = jsonEnvelope(line); err != nil {
				return &readback.ReadError{Key: key, Record: n, Err: err}
			}
		}
		return fn(rec)
	})
}

// decodeAvro reads the envelope's OCF datums as generic values: a
// ["null", "bytes"|"string"] union reads as nil, []byte or string.
func decodeAvro(ctx context.Context, r io.Reader, key string, fn func(*kgo.Record) error) error {
	return readback.AvroDatums(ctx, r, key, func(n int64, datum any) error {
		rec, err := avroRecord(datum)
		if err != nil {
			return &readback.ReadError{Key: key, Record: n, Err: err}
		}
		return fn(rec)
	})
}

func avroRecord(datum any) (*kgo.Record, error) {
	m, ok := datum.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a datum is a %T, not the envelope's record", datum)
	}
	rec := &kgo.Record{}
	var err error
	if rec.Key, err = avroBlob(m["key"]); err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if rec.Value, err = avroBlob(m["value"]); err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	if rec.Offset, ok = m["offset"].(int64); !ok {
		return nil, fmt.Errorf("offset is a %T, not a long", m["offset"])
	}
	switch ts := m["timestamp"].(type) {
	case int64:
		rec.Timestamp = time.UnixMilli(ts)
	case time.Time:
		rec.Timestamp = ts
	default:
		return nil, fmt.Errorf("timestamp is a %T, not a long", ts)
	}
	hs, ok := m["headers"].([]any)
	if !ok {
		return nil, fmt.Errorf("headers is a %T, not an array", m["headers"])
	}
	for i, h := range hs {
		hm, ok := h.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("header %d is a %T, not a record", i, h)
		}
		k, ok := hm["key"].(string)
		if !ok {
			return nil, fmt.Errorf("header %d's key is a %T, not a string", i, hm["key"])
		}
		v, err := avroBlob(hm["value"])
		if err != nil {
			return nil, fmt.Errorf("header %d's value: %w", i, err)
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: v})
	}
	return rec, nil
}

// avroBlob is a nullable bytes or string: nil for null, and a non-nil
// slice, empty or not, for a value.
func avroBlob(v any) ([]byte, error) {
	switch b := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		if b == nil {
			b = []byte{}
		}
		return b, nil
	case string:
		return append([]byte{}, b...), nil
	}
	return nil, fmt.Errorf("a %T, not bytes or a string", v)
}

// parquetCols are the leaf columns of the envelope's schema.
type parquetCols struct{ key, value, offset, timestamp, headerKey, headerValue int }

func decodeParquet(ctx context.Context, r io.Reader, key string, fn func(*kgo.Record) error) error {
	var c parquetCols
	open := func(f *parquet.File) error {
		for _, col := range []struct {
			dst  *int
			path []string
		}{
			{&c.key, []string{"key"}}, {&c.value, []string{"value"}}, {&c.offset, []string{"offset"}}, {&c.timestamp, []string{"timestamp"}},
			{&c.headerKey, []string{"headers", "list", "element", "key"}}, {&c.headerValue, []string{"headers", "list", "element", "value"}},
		} {
			leaf, ok := f.Schema().Lookup(col.path...)
			if !ok {
				return &readback.ReadError{Key: key, Err: fmt.Errorf("the file has no column %v: not Spillway's envelope", col.path)}
			}
			*col.dst = leaf.ColumnIndex
		}
		return nil
	}
	return readback.ParquetRows(ctx, r, key, open, func(_ int64, row parquet.Row) error {
		return fn(parquetRecord(row, &c))
	})
}

// parquetRecord rebuilds a record from a row of the envelope (see
// format/parquet's appendRow for the levels): every byte slice is copied,
// since the reader reuses the row's memory.
func parquetRecord(row parquet.Row, c *parquetCols) *kgo.Record {
	rec := &kgo.Record{}
	blob := func(v parquet.Value) []byte {
		if v.IsNull() {
			return nil
		}
		return append([]byte{}, v.ByteArray()...)
	}
	var hvals [][]byte
	for _, v := range row {
		switch v.Column() {
		case c.key:
			rec.Key = blob(v)
		case c.value:
			rec.Value = blob(v)
		case c.offset:
			rec.Offset = v.Int64()
		case c.timestamp:
			rec.Timestamp = time.UnixMilli(v.Int64())
		case c.headerKey:
			if v.DefinitionLevel() > 0 {
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: string(v.ByteArray())})
			}
		case c.headerValue:
			if v.DefinitionLevel() > 0 {
				if v.DefinitionLevel() < 2 {
					hvals = append(hvals, nil)
				} else {
					hvals = append(hvals, append([]byte{}, v.ByteArray()...))
				}
			}
		}
	}
	for i := range rec.Headers {
		if i < len(hvals) {
			rec.Headers[i].Value = hvals[i]
		}
	}
	return rec
}
