// Package parquet writes Parquet files with parquet-go: the envelope of
// format.fields (package format's Envelope) or, with a schema registry,
// columns from the registered schemas (format.Typed), in row groups cut
// by bytes with pages compressed inside the file. Kind is its entry in the
// table of formats (package formats). Inside this package the name
// parquet is parquet-go's.
package parquet

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	pqcompress "github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
)

// Byte thresholds of a parquet writer. A row group is written out when its
// buffered size (pages already encoded and compressed, plus values not yet
// in a page) reaches Memory.FlushBytes, parquetRowGroupBytes by default, so
// that is what an open parquet file buffers at most, counted as it grows
// (Memory.Grow). 4 MiB of compressed pages is some 10 to 20 MiB of Kafka
// values per row group: small by the usual analytics standard (128 MiB),
// but one open file per partition must fit the budget next to hundreds of
// others, and readers read small row groups correctly, only with more
// metadata per byte. The runner derives the threshold from the budget
// (FlushBytes). Pages are cut at parquetPageBytes of values per column.
const (
	parquetRowGroupBytes = 4 << 20
	parquetPageBytes     = 128 << 10
)

// parquetEncoder writes one Parquet file with parquet-go: column chunks
// compressed by the codec format.compression names (none → UNCOMPRESSED,
// gzip → GZIP, snappy → SNAPPY, zstd → ZSTD), data pages v1 with PLAIN
// values, and the envelope as the schema:
//
//	key, value: optional binary (STRING)  or  optional binary (bytes)
//	offset:     required int64
//	timestamp:  required int64 (TIMESTAMP(MILLIS, isAdjustedToUTC=true))
//	partition:  optional int32 (never null; optional because an Iceberg
//	            table can only gain optional columns, and the tables made
//	            before the files held it have it optional)
//	headers:    required group (LIST) { repeated group list {
//	              required group element { required binary key (STRING);
//	                                       optional binary value (STRING or bytes) } } }
//
// Headers are a LIST of structs rather than a MAP because Kafka headers are
// ordered and may repeat a key, which a MAP may not (DuckDB refuses
// duplicate map keys); DuckDB reads the column as STRUCT(key, value)[] and
// Spark as array<struct<key,value>>.
type parquetEncoder struct {
	w    *parquet.GenericWriter[any] // written with WriteRows only
	env  format.Envelope
	cols parquetColumns
	row  parquet.Row
	// base is w.Size() after the last row group went out, so
	// w.Size()-base is what the open row group holds.
	base int64
	mem  format.BufferCount
	// micros writes the timestamp in microseconds (config.Format.Micros).
	micros bool

	err    error
	closed bool
}

// parquetColumns are the leaf column indexes of the envelope's fields.
type parquetColumns struct {
	key, value, offset, timestamp, partition, headerKey, headerValue int
}

func newParquetEncoder(cfg config.Format, w io.Writer, m format.Memory) (*parquetEncoder, error) {
	env, err := format.NewEnvelope(cfg)
	if err != nil {
		return nil, err
	}
	codec, err := parquetCodec(cfg.Compression)
	if err != nil {
		return nil, err
	}
	schema := parquetSchema(env, cfg.Micros)
	wcfg, err := parquet.NewWriterConfig(
		schema,
		parquet.Compression(codec),
		parquet.PageBufferSize(parquetPageBytes),
		// Data pages v1 and PLAIN byte arrays (parquet-go's default is
		// DELTA_LENGTH_BYTE_ARRAY) are what every reader reads, Spark's
		// vectorized reader before 3.3 and older Hive and Impala included;
		// parquet-mr writes the same by default.
		parquet.DataPageVersion(1),
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
		// Keys and values are blobs: their min and max mean nothing to a
		// query, and parquet-go copies them whole into every page header
		// and the footer's statistics and column index, so one 32 MiB
		// value would cost some 20 copies of itself in Encode and 4 in the
		// file. Offsets and timestamps keep theirs, for row-group pruning.
		parquet.SkipPageBounds("key"),
		parquet.SkipPageStatistics("key"),
		parquet.SkipPageBounds("value"),
		parquet.SkipPageStatistics("value"),
		parquet.SkipPageBounds("headers", "list", "element", "value"),
		parquet.SkipPageStatistics("headers", "list", "element", "value"),
	)
	if err != nil {
		return nil, fmt.Errorf("format: parquet writer: %w", err)
	}
	e := &parquetEncoder{w: parquet.NewGenericWriter[any](w, wcfg), env: env, micros: cfg.Micros, mem: format.NewBufferCount(m, parquetRowGroupBytes, parquetReportStep)}
	col := func(path ...string) int {
		leaf, ok := schema.Lookup(path...)
		if !ok {
			return -1
		}
		return leaf.ColumnIndex
	}
	e.cols = parquetColumns{
		key: col("key"), value: col("value"), offset: col("offset"), timestamp: col("timestamp"), partition: col("partition"),
		headerKey: col("headers", "list", "element", "key"), headerValue: col("headers", "list", "element", "value"),
	}
	return e, nil
}

func parquetCodec(kind string) (pqcompress.Codec, error) {
	switch kind {
	case "", "none":
		return &parquet.Uncompressed, nil
	case "gzip":
		return &parquet.Gzip, nil
	case "snappy":
		return &parquet.Snappy, nil
	case "zstd":
		// parquet-go's codecs keep their compressors in a pool shared by
		// every file, so an open file holds none between pages.
		return &parquet.Zstd, nil
	}
	return nil, fmt.Errorf("format.compression %q is unknown; valid: none, gzip, zstd, snappy", kind)
}

// parquetSchema is the envelope as a Parquet schema, with the fixed
// Iceberg field ids of its columns (see envelopeIDs); see parquetEncoder.
func parquetSchema(env format.Envelope, micros bool) *parquet.Schema {
	blob := parquet.Leaf(parquet.ByteArrayType)
	if env.Text {
		blob = parquet.String()
	}
	var root orderedGroup
	for _, f := range env.Fields {
		var n parquet.Node
		switch f {
		case format.FieldKey, format.FieldValue:
			n = parquet.Optional(blob)
		case format.FieldOffset:
			n = parquet.Leaf(parquet.Int64Type)
		case format.FieldTimestamp:
			n = parquet.TimestampAdjusted(timeUnit(micros), true)
		case format.FieldPartition:
			n = parquet.Optional(parquet.Leaf(parquet.Int32Type))
		case format.FieldHeaders:
			n = parquet.List(envelopeID(parquet.Group{
				"key":   envelopeID(parquet.String(), "headers.element.key"),
				"value": envelopeID(parquet.Optional(blob), "headers.element.value"),
			}, "headers.element"))
		}
		name := format.FieldNames[f]
		root = append(root, namedNode{Node: envelopeID(n, name), name: name})
	}
	return parquet.NewSchema(format.EnvelopeName, root)
}

func (e *parquetEncoder) Encode(r *kgo.Record) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return format.ErrClosed
	}
	if err := e.env.Check(r); err != nil {
		return err
	}
	// A record as large as a row group gets one of its own: the row group
	// it would join goes out first, so that the record costs its own
	// copies (see parquetBigRecord) and not a full row group's besides.
	size := int64(format.RecordBytes(r))
	big := size >= e.mem.Flush
	if big && e.w.Size() > e.base {
		if err := e.flushRowGroup(); err != nil {
			return err
		}
	}
	e.row = e.appendRow(e.row[:0], r)
	if big {
		// Counted while parquet-go copies it (see parquetBigRecord).
		e.mem.Set(parquetBigRecord * size)
	}
	_, err := e.w.WriteRows([]parquet.Row{e.row})
	// The row points into r: drop the references, so a file does not keep
	// its last record alive.
	clear(e.row)
	if cap(e.row) > 1024 {
		e.row = nil
	}
	if err != nil {
		e.err = fmt.Errorf("format: writing parquet row: %w", err)
		return e.err
	}
	held := e.w.Size() - e.base
	e.mem.Set(held)
	if held >= e.mem.Flush {
		return e.flushRowGroup()
	}
	return nil
}

// parquetBigRecord is how many times its size a record as large as a row
// group costs parquet-go while it is written, measured by
// TestBigRecordCost: it is copied into the column's value buffer (which
// grows by half at a time), encoded, prefixed with its levels, compressed,
// and put in a page buffer: 4.7 to 6.03 times its size allocated in all,
// by codec (less when parquet-go's pools hold buffers from earlier pages;
// zstd measured 6.01 to 6.03 in about one run of three once CI measured it
// without -race). The copies are garbage once its row group is written
// out, which Encode does at once; they are counted while the record is
// written.
const parquetBigRecord = 7

// parquetReportStep: a parquet encoder tells Memory.Grow of changes of at
// least this much (see BufferCount.step).
const parquetReportStep = 64 << 10

// flushRowGroup writes the open row group out.
func (e *parquetEncoder) flushRowGroup() error {
	if err := e.w.Flush(); err != nil {
		e.err = fmt.Errorf("format: writing parquet row group: %w", err)
		return e.err
	}
	e.base = e.w.Size()
	e.mem.Set(0)
	return nil
}

// appendRow appends r's values in column order, with the repetition and
// definition levels of the envelope schema (see parquetSchema): an
// optional field is defined at level 1; a header's key at level 1 and its
// value at 2 (1 when null); no headers at all is one null at level 0 in
// both header columns.
func (e *parquetEncoder) appendRow(row parquet.Row, r *kgo.Record) parquet.Row {
	c := &e.cols
	blob := func(b []byte, col int) parquet.Value {
		if b == nil {
			return parquet.NullValue().Level(0, 0, col)
		}
		return parquet.ByteArrayValue(b).Level(0, 1, col)
	}
	for _, f := range e.env.Fields {
		switch f {
		case format.FieldKey:
			row = append(row, blob(r.Key, c.key))
		case format.FieldValue:
			row = append(row, blob(r.Value, c.value))
		case format.FieldOffset:
			row = append(row, parquet.Int64Value(r.Offset).Level(0, 0, c.offset))
		case format.FieldTimestamp:
			row = append(row, parquet.Int64Value(timestampOf(r.Timestamp, e.micros)).Level(0, 0, c.timestamp))
		case format.FieldPartition:
			row = append(row, parquet.Int32Value(r.Partition).Level(0, 1, c.partition))
		case format.FieldHeaders:
			if len(r.Headers) == 0 {
				row = append(row, parquet.NullValue().Level(0, 0, c.headerKey), parquet.NullValue().Level(0, 0, c.headerValue))
				continue
			}
			for i, h := range r.Headers {
				// The writer copies the bytes; the string is only read.
				k := unsafe.Slice(unsafe.StringData(h.Key), len(h.Key))
				row = append(row, parquet.ByteArrayValue(k).Level(min(i, 1), 1, c.headerKey))
			}
			for i, h := range r.Headers {
				if h.Value == nil {
					row = append(row, parquet.NullValue().Level(min(i, 1), 1, c.headerValue))
				} else {
					row = append(row, parquet.ByteArrayValue(h.Value).Level(min(i, 1), 2, c.headerValue))
				}
			}
		}
	}
	return row
}

// Close writes the last row group and the footer. It does not close the
// underlying writer.
func (e *parquetEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	defer e.mem.Set(0)
	if e.err != nil {
		return e.err
	}
	if err := e.w.Close(); err != nil {
		e.err = fmt.Errorf("format: finishing parquet file: %w", err)
	}
	return e.err
}

// orderedGroup is a Parquet group whose columns keep the order of
// format.fields. parquet-go's Group is a map and sorts its fields by name,
// and its authors suggest a Node of one's own for a fixed order.
type orderedGroup []parquet.Field

func (g orderedGroup) ID() int { return 0 }
func (g orderedGroup) String() string {
	var b strings.Builder
	_ = parquet.PrintSchema(&b, "", g)
	return b.String()
}
func (orderedGroup) Type() parquet.Type            { return parquet.Group{}.Type() }
func (orderedGroup) Optional() bool                { return false }
func (orderedGroup) Repeated() bool                { return false }
func (orderedGroup) Required() bool                { return true }
func (orderedGroup) Leaf() bool                    { return false }
func (g orderedGroup) Fields() []parquet.Field     { return g }
func (orderedGroup) Encoding() encoding.Encoding   { return nil }
func (orderedGroup) Compression() pqcompress.Codec { return nil }
func (orderedGroup) GoType() reflect.Type          { return reflect.TypeFor[map[string]any]() }

// namedNode is one field of an orderedGroup. Rows are built by appendRow,
// never from Go values, so Value only serves parquet-go's generic paths.
type namedNode struct {
	parquet.Node
	name string
}

func (f namedNode) Name() string { return f.name }

func (f namedNode) Value(base reflect.Value) reflect.Value {
	if base.Kind() == reflect.Map {
		return base.MapIndex(reflect.ValueOf(f.name))
	}
	return reflect.Value{}
}

// timeUnit is the envelope timestamp's unit: milliseconds, Kafka's, or
// microseconds, Iceberg's (config.Format.Micros).
func timeUnit(micros bool) parquet.TimeUnit {
	if micros {
		return parquet.Microsecond
	}
	return parquet.Millisecond
}

// timestampOf is t in the envelope timestamp's unit.
func timestampOf(t time.Time, micros bool) int64 {
	if micros {
		return t.UnixMicro()
	}
	return t.UnixMilli()
}
