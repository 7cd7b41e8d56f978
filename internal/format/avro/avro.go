// Package avro writes Avro Object Container Files: the envelope of
// format.fields (package format's Envelope) or, with a schema registry,
// the registered schemas (format.Typed), in blocks cut by bytes and
// compressed inside the file. Kind is its entry in the table of formats
// (package formats); the encoders are only reached through it.
package avro

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
)

// avroBlockBytes is the default encoded size at which an Avro block is
// compressed and written out (Memory.FlushBytes sets it per file). Blocks
// are cut by bytes, never by a record count alone, so an open Avro file
// holds at most one block (plus the record that crossed the line) however
// small or large its records are. 256 KiB keeps that small next to a
// storage part, and big enough for the codecs to find repeats (Java's
// default is 64,000 bytes).
const avroBlockBytes = 256 << 10

// avroEncoder writes an Avro Object Container File: the header, then one
// block per avroBlockBytes of encoded records, each compressed by the
// codec format.compression names (none → null, gzip → deflate, snappy,
// zstd → zstandard).
//
// twmb/avro encodes each datum and writes the header (magic, schema,
// codec name, sync marker); the block framing (count, size, compressed
// bytes, sync marker) is done here because ocf.Writer keeps its block
// buffer at the largest size it ever held: one 50 MiB record would pin
// 50 MiB in every file it passed through, outside the budget. Here a
// buffer that outgrew a block is dropped after the block is written.
type avroEncoder struct {
	w      io.Writer
	schema *avro.Schema
	env    format.Envelope
	codec  avroCodec
	sync   [16]byte

	block []byte // encoded records of the open block
	count int64  // records in block
	cbuf  []byte // compressed block, reused
	datum avroDatum
	mem   format.BufferCount

	err    error // first write error, returned forever after
	closed bool
}

// avroDatum is one envelope record as twmb/avro encodes it: fields are
// matched by name, so the fields format.fields leaves out are ignored.
// Key, value and header values are []byte for both bytes and string
// schemas, which the encoder accepts alike.
type avroDatum struct {
	Key       []byte       `avro:"key"`
	Value     []byte       `avro:"value"`
	Offset    int64        `avro:"offset"`
	Timestamp int64        `avro:"timestamp"` // milliseconds, as timestamp-millis holds them
	Headers   []avroHeader `avro:"headers"`
	Partition int32        `avro:"partition"`
}

type avroHeader struct {
	Key   string `avro:"key"`
	Value []byte `avro:"value"`
}

func newAvroEncoder(cfg config.Format, w io.Writer, sync [16]byte, m format.Memory) (*avroEncoder, error) {
	env, err := format.NewEnvelope(cfg)
	if err != nil {
		return nil, err
	}
	schema, err := avroSchema(env)
	if err != nil {
		return nil, err
	}
	codec, err := newAvroCodec(cfg.Compression)
	if err != nil {
		return nil, err
	}
	e := &avroEncoder{w: w, schema: schema, env: env, codec: codec, sync: sync, mem: format.NewBufferCount(m, avroBlockBytes, 0)}
	// ocf.NewWriter writes the header and is then dropped: the header is
	// all it is used for (see avroEncoder).
	if _, err := ocf.NewWriter(w, schema, ocf.WithCodec(codecName(codec.name())), ocf.WithSyncMarker(sync)); err != nil {
		codec.close()
		return nil, fmt.Errorf("format: writing avro header: %w", err)
	}
	return e, nil
}

// newAvroFile is NewEncoder's avro case: a random sync marker, as the spec
// asks, so that a reader can't mistake data for a block boundary.
func newAvroFile(cfg config.Format, w io.Writer, m format.Memory) (format.Encoder, error) {
	sync, err := newSyncMarker()
	if err != nil {
		return nil, err
	}
	return newAvroEncoder(cfg, w, sync, m)
}

func newSyncMarker() (sync [16]byte, err error) {
	if _, err := rand.Read(sync[:]); err != nil {
		return sync, fmt.Errorf("format: avro sync marker: %w", err)
	}
	return sync, nil
}

// Reset starts a new file on w, with a new sync marker, after Close ended
// the last: it keeps the schema and the codec's compressor, the state that
// costs far more to build than the file's records (a zstd encoder's
// tables), so that a sink reuses it from file to file.
func (e *avroEncoder) Reset(w io.Writer) error {
	if !e.closed {
		return format.ErrNotClosed // its buffers would still be counted
	}
	sync, err := newSyncMarker()
	if err != nil {
		return err
	}
	e.w, e.sync, e.err, e.closed, e.count = w, sync, nil, false, 0
	if _, err := ocf.NewWriter(w, e.schema, ocf.WithCodec(codecName(e.codec.name())), ocf.WithSyncMarker(sync)); err != nil {
		e.err = fmt.Errorf("format: writing avro header: %w", err)
		return e.err
	}
	return nil
}

// avroSchemaJSON is the JSON form of an Avro schema node, enough for the
// envelope.
type avroSchemaJSON struct {
	Type        any             `json:"type"`
	Name        string          `json:"name,omitempty"`
	Namespace   string          `json:"namespace,omitempty"`
	Fields      []avroFieldJSON `json:"fields,omitempty"`
	Items       *avroSchemaJSON `json:"items,omitempty"`
	LogicalType string          `json:"logicalType,omitempty"`
}

type avroFieldJSON struct {
	Name string `json:"name"`
	Type any    `json:"type"`
}

// avroSchema is the envelope as an Avro record:
//
//	key, value: ["null", "bytes"] or ["null", "string"] (null for a null key or a tombstone)
//	offset:     long
//	timestamp:  {"type": "long", "logicalType": "timestamp-millis"}
//	headers:    {"type": "array", "items": header}, header = {key: string, value: ["null", "bytes"|"string"]}
//	partition:  int (the Kafka partition)
func avroSchema(env format.Envelope) (*avro.Schema, error) {
	blob := "bytes"
	if env.Text {
		blob = "string"
	}
	nullable := []string{"null", blob}
	rec := avroSchemaJSON{Type: "record", Name: format.EnvelopeName, Namespace: format.EnvelopeNamespace}
	for _, f := range env.Fields {
		var typ any
		switch f {
		case format.FieldKey, format.FieldValue:
			typ = nullable
		case format.FieldOffset:
			typ = "long"
		case format.FieldTimestamp:
			typ = avroSchemaJSON{Type: "long", LogicalType: "timestamp-millis"}
		case format.FieldPartition:
			typ = "int"
		case format.FieldHeaders:
			typ = avroSchemaJSON{Type: "array", Items: &avroSchemaJSON{
				Type: "record", Name: "header",
				Fields: []avroFieldJSON{{Name: "key", Type: "string"}, {Name: "value", Type: nullable}},
			}}
		}
		rec.Fields = append(rec.Fields, avroFieldJSON{Name: format.FieldNames[f], Type: typ})
	}
	js, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("format: avro schema: %w", err)
	}
	s, err := avro.Parse(string(js))
	if err != nil {
		return nil, fmt.Errorf("format: avro schema %s: %w", js, err)
	}
	return s, nil
}

func (e *avroEncoder) Encode(r *kgo.Record) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return format.ErrClosed
	}
	if err := e.env.Check(r); err != nil {
		return err
	}
	// A record as large as a block gets a block of its own, so that blocks
	// stay within the threshold but for single records, and the record
	// costs its own encoding and compression, not those of a full block
	// besides.
	size := format.RecordBytes(r)
	if e.count > 0 && int64(size) >= e.mem.Flush {
		if err := e.flush(); err != nil {
			return err
		}
	}
	d := &e.datum
	d.Key, d.Value, d.Offset, d.Timestamp, d.Partition = r.Key, r.Value, r.Offset, r.Timestamp.UnixMilli(), r.Partition
	d.Headers = d.Headers[:0]
	for _, h := range r.Headers {
		d.Headers = append(d.Headers, avroHeader(h))
	}
	e.reserve(size + 16*len(r.Headers) + 32)
	b, err := e.schema.AppendEncode(e.block, d)
	// The datum points into r: drop the references, so a file does not
	// keep its last record alive.
	*d = avroDatum{Headers: clearHeaders(d.Headers)}
	if err != nil {
		// AppendEncode only appends: e.block still ends at the last good
		// record, and the bytes past it are overwritten by the next.
		return fmt.Errorf("%w: offset %d does not fit the avro schema: %v", format.ErrRecord, r.Offset, err)
	}
	e.block = b
	e.count++
	e.account()
	if int64(len(e.block)) >= e.mem.Flush {
		return e.flush()
	}
	return nil
}

// reserve makes room in the block for n more bytes. The buffer grows as
// the block does (a file that sees a few small records holds a few KiB,
// not a block), and up to a block and a quarter at once, so that the
// record that crosses the threshold rarely makes it grow again.
func (e *avroEncoder) reserve(n int) {
	need := len(e.block) + n
	if need <= cap(e.block) {
		return
	}
	c := min(max(2*cap(e.block), avroFirstBuffer), int(e.mem.Flush+e.mem.Flush/4))
	b := make([]byte, len(e.block), max(c, need))
	copy(b, e.block)
	e.block = b
	e.account()
}

// avroFirstBuffer is the block buffer a file starts with.
const avroFirstBuffer = 16 << 10

// account tells Memory.Grow what the block buffers hold now.
func (e *avroEncoder) account() { e.mem.Set(int64(cap(e.block) + cap(e.cbuf))) }

// clearHeaders zeroes hs and returns it empty, for reuse.
func clearHeaders(hs []avroHeader) []avroHeader {
	clear(hs)
	if cap(hs) > 1024 {
		return nil
	}
	return hs[:0]
}

// flush compresses the open block and writes it with its framing.
func (e *avroEncoder) flush() error {
	c, err := e.codec.compress(e.cbuf[:0], e.block)
	if err != nil {
		e.err = fmt.Errorf("format: compressing avro block: %w", err)
		return e.err
	}
	var hdr [2 * binary.MaxVarintLen64]byte
	n := binary.PutVarint(hdr[:], e.count)
	n += binary.PutVarint(hdr[n:], int64(len(c)))
	for _, p := range [][]byte{hdr[:n], c, e.sync[:]} {
		if _, err := e.w.Write(p); err != nil {
			e.err = fmt.Errorf("format: writing avro output: %w", err)
			return e.err
		}
	}
	if _, null := e.codec.(nullCodec); !null { // null returns the block itself
		e.cbuf = c
		e.account() // the compressed block, while it is written
	}
	keep := e.mem.Flush * 3 / 2
	e.block, e.cbuf = trimBuffer(e.block, keep), trimBuffer(e.cbuf, keep)
	e.count = 0
	e.account()
	return nil
}

// trimBuffer empties b for reuse, or drops it if a large record grew it
// past keep, what a block needs: the block buffer grows to a block and a
// quarter, and past keep only when a record carried it well past the
// threshold; the compressed block of a full block stays under it (snappy's
// worst case is 7/6 of its input).
func trimBuffer(b []byte, keep int64) []byte {
	if int64(cap(b)) > keep {
		return nil
	}
	return b[:0]
}

// avroMaxBuffered is the most an avro encoder's buffers hold with records
// smaller than the threshold: a block buffer of a block and a quarter and
// its compressed block, kept up to a block and a half each.
func avroMaxBuffered(flush int64) int64 { return 3 * flush }

// Close writes the last block. It does not close the underlying writer.
func (e *avroEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	defer e.codec.close()
	if e.err == nil && e.count > 0 {
		e.err = e.flush()
	}
	e.block, e.cbuf = nil, nil
	e.account()
	return e.err
}

// avroCodec compresses Avro blocks, reusing dst. It holds its compressor
// from block to block (a flate or zstd encoder costs far more to build
// than to reset).
type avroCodec interface {
	name() string // the avro.codec header value
	compress(dst, src []byte) ([]byte, error)
	close()
}

func newAvroCodec(kind string) (avroCodec, error) {
	switch kind {
	case "", "none":
		return nullCodec{}, nil
	case "gzip":
		return &deflateCodec{}, nil
	case "snappy":
		return snappyCodec{}, nil
	case "zstd":
		// The default level, unlike the jsonl stream's fastest: Avro
		// encoding costs more than its compression, so on 1 KiB JSON
		// records the fastest level was only 1.03-1.05x faster end to
		// end, for files 11% larger (ratio 4.77 against 5.29).
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(avroZstdWindow),
			zstd.WithLowerEncoderMem(true),
		)
		if err != nil {
			return nil, fmt.Errorf("format: zstd: %w", err)
		}
		return zstdCodec{enc}, nil
	}
	return nil, fmt.Errorf("format.compression %q is unknown; valid: none, gzip, zstd, snappy", kind)
}

type nullCodec struct{}

func (nullCodec) name() string                           { return "null" }
func (nullCodec) compress(_, src []byte) ([]byte, error) { return src, nil }
func (nullCodec) close()                                 {}

// deflateCodec writes raw DEFLATE (RFC 1951, no zlib or gzip framing), as
// the Avro spec's deflate codec is.
type deflateCodec struct{ fw *flate.Writer }

func (*deflateCodec) name() string { return "deflate" }

func (c *deflateCodec) compress(dst, src []byte) ([]byte, error) {
	// As zstdCodec: one buffer of the worst case (stored blocks, 5 bytes
	// per 64 KiB) for a large block, rather than a growing one.
	if n := len(src) + len(src)/8192 + 64; cap(dst) < n && len(src) > 1<<20 {
		dst = make([]byte, 0, n)
	}
	buf := bytes.NewBuffer(dst[:0])
	if c.fw == nil {
		fw, err := flate.NewWriter(buf, flate.DefaultCompression)
		if err != nil {
			return nil, err
		}
		c.fw = fw
	} else {
		c.fw.Reset(buf)
	}
	if _, err := c.fw.Write(src); err != nil {
		return nil, err
	}
	if err := c.fw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (*deflateCodec) close() {}

// snappyCodec is snappy's block format followed by the big-endian CRC-32
// of the uncompressed block, as the Avro spec asks.
type snappyCodec struct{}

func (snappyCodec) name() string { return "snappy" }

func (snappyCodec) compress(dst, src []byte) ([]byte, error) {
	if n := snappy.MaxEncodedLen(len(src)) + 4; cap(dst) < n {
		dst = make([]byte, n)
	}
	out := snappy.Encode(dst[:cap(dst)], src)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(src)), nil
}

func (snappyCodec) close() {}

// avroZstdWindow: each block is compressed on its own, so a window larger
// than a block (plus the record that crossed the line) finds nothing more
// and costs memory.
const avroZstdWindow = 512 << 10

type zstdCodec struct{ enc *zstd.Encoder }

func (zstdCodec) name() string { return "zstandard" }

func (c zstdCodec) compress(dst, src []byte) ([]byte, error) {
	// EncodeAll sizes its output up front only below 1 MiB; above, it
	// appends block by block, and a 32 MiB record's block cost six times
	// its size in grown copies. One buffer of the worst case costs one.
	if n := c.enc.MaxEncodedSize(len(src)); cap(dst) < n && len(src) > 1<<20 {
		dst = make([]byte, 0, n)
	}
	return c.enc.EncodeAll(src, dst[:0]), nil
}

func (c zstdCodec) close() { c.enc.Close() }

// codecName hands ocf.NewWriter the name to put in the header; the
// blocks are compressed by an avroCodec, never by this.
type codecName string

var errHeaderOnly = errors.New("format: the avro header codec only names the codec")

func (c codecName) Name() string                    { return string(c) }
func (codecName) Compress([]byte) ([]byte, error)   { return nil, errHeaderOnly }
func (codecName) Decompress([]byte) ([]byte, error) { return nil, errHeaderOnly }
func (codecName) Close() error                      { return nil }
