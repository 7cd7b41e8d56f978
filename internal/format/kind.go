package format

import (
	"fmt"
	"io"
)

// Kind is one file format: what everything outside the encoders needs to
// know about it (its name and extension, how to build its encoders, what
// its open files cost), so that no caller switches on the format's name.
// CSV's and Bytes' kinds are here; jsonl's and json's are in package
// jsonfmt, avro's and parquet's in their packages, and package formats
// holds the table of all of them. A Kind is a value built by a function, never a registered
// global: callers get a copy.
//
// The zero Kind's methods answer as a text format does (no buffering,
// compression as a stream), but it builds no encoder.
type Kind struct {
	// Name is the format.type value.
	Name string
	// Ext is the file name extension, without its dot, before any
	// compression suffix: "jsonl", "bin" for bytes (Confluent's
	// format.bytearray.extension default).
	Ext string
	// CompressesInside: the encoder compresses blocks or pages inside the
	// file with format.compression (avro, parquet), so its output is not
	// wrapped in a stream compressor and the file name gets no
	// compression suffix (the file is not a gzip or zstd stream, and a
	// ".gz" would mislead tools that go by the name).
	CompressesInside bool
	// Envelope: format.envelope applies, so that a record is an envelope
	// of format.fields, or one bare field without it. A csv row and a
	// bytes record have no envelope to leave out.
	Envelope bool
	// ValueOnly: the format writes each record's value alone, records
	// separated by format.bytes_separator (bytes). format.fields can't
	// name other fields, and the separator means nothing to other formats.
	ValueOnly bool
	// JSONRecords: every record is a JSON text in the file, one a line
	// (jsonl) or the elements of one array (json), so that a reader finds
	// a record's fields, its offset among them, without a schema.
	JSONRecords bool

	// New builds an encoder of cfg writing to w. m says how an encoder
	// that buffers blocks or row groups bounds and counts them; the
	// others hold no more than a record and ignore it.
	New func(cfg Options, w io.Writer, m Memory) (Encoder, error)
	// NewTyped builds the encoder of a file whose columns come from the
	// registry (see Typed), for the formats that take their schema from
	// it (avro, parquet); nil for the text formats, which write decoded
	// keys and values as JSON through New's encoder.
	NewTyped func(t *Typed, ids SchemaIDs, w io.Writer) (Encoder, error)

	// Buffering is how the formats that buffer blocks or row groups size
	// them; the zero value for the formats that don't.
	Buffering Buffering
}

// Buffering is a buffering format's memory figures (docs/memory.md).
type Buffering struct {
	// DefaultFlush is the block or row-group threshold when Memory gives
	// none; MinFlush and MaxFlush bound the threshold FlushBytes derives
	// from the budget. 0 for a format that does not buffer.
	DefaultFlush, MinFlush, MaxFlush int64
	// Fixed is what an open file's encoder holds whatever it buffers, by
	// format.compression (see Kind.FixedMemory).
	Fixed func(compression string) int64
	// MaxBuffered is the most the encoder buffers with threshold flush
	// (see Kind.MaxBuffered).
	MaxBuffered func(flush int64) int64
	// LargeRecordCopies: see Kind.LargeRecordCopies.
	LargeRecordCopies func(compression string) int64
}

// NewEncoder returns an encoder for cfg writing to w. The zero
// ValueEncoding means "none", as in config's defaults.
func (k Kind) NewEncoder(cfg Options, w io.Writer) (Encoder, error) {
	return k.NewBufferedEncoder(cfg, w, Memory{})
}

// NewBufferedEncoder is NewEncoder with m for the formats that buffer
// blocks or row groups (avro, parquet); the others hold no more than a
// record and ignore m.
func (k Kind) NewBufferedEncoder(cfg Options, w io.Writer, m Memory) (Encoder, error) {
	if k.New == nil {
		return nil, fmt.Errorf("format.type %q is unknown", cfg.Type)
	}
	return k.New(cfg, w, m)
}

// Buffers says whether the format's encoder buffers blocks or row groups,
// which it counts as they grow (Memory).
func (k Kind) Buffers() bool { return k.Buffering.DefaultFlush > 0 }

// DefaultFlushBytes is the threshold when Memory gives none: 256 KiB
// blocks and 4 MiB row groups; 0 for the formats that don't buffer.
func (k Kind) DefaultFlushBytes() int64 { return k.Buffering.DefaultFlush }

// FlushBytes is the block or row-group threshold when an open file's
// share of the data budget is perFile bytes (see budget.Plan.FileShare):
// half of it, in the format's bounds. The other half is the file's fixed
// state, its storage writer and its chunk. 0 for the formats that don't
// buffer.
func (k Kind) FlushBytes(perFile int64) int64 {
	if !k.Buffers() {
		return 0
	}
	return min(max(perFile/2, k.Buffering.MinFlush), k.Buffering.MaxFlush)
}

// FixedMemory is what one open file's encoder and compressor hold from
// the start, whatever they buffer: the stream compressor for the text
// formats (CompressorMemory); the schema, codec and page state for avro
// and parquet, whose blocks and row groups are counted apart as they grow
// (Memory.Grow). The sink charges it when it opens a file.
func (k Kind) FixedMemory(cfg Options) int64 {
	if k.Buffering.Fixed != nil {
		return k.Buffering.Fixed(cfg.Compression)
	}
	return CompressorMemory(cfg.Compression)
}

// MaxBuffered is the most an avro or parquet encoder with threshold
// flushBytes buffers (what Memory.Grow adds up to at its peak), with
// records smaller than the threshold: a block or row group just under it,
// the record that crosses it, and for avro the compressed block. 0 for
// the other formats.
func (k Kind) MaxBuffered(flushBytes int64) int64 {
	if k.Buffering.MaxBuffered == nil {
		return 0
	}
	return k.Buffering.MaxBuffered(flushBytes)
}

// LargeRecordCopies is how many copies of a record as large as a block or
// row group cfg's encoder holds at once while it writes it, besides the
// record itself (which the Kafka client holds): none for the text formats,
// which write a large value through in pieces; for Avro its encoded block,
// and with a codec the compressed block too; for Parquet, parquet-go's
// column buffer, the encoded page, the page with its levels prefixed (data
// pages v1) and the page buffer of the row group (compressed, as large as
// the value without a codec). Measured by TestBigRecordCost (allocations)
// and, as peak memory of the process, by the e2e test
// TestOversizedRecordsEveryFormatUnderCgroup. The budget plan turns it into
// the advice for such records (budget.Plan.LargeRecordMultiple).
func (k Kind) LargeRecordCopies(cfg Options) int64 {
	if k.Buffering.LargeRecordCopies == nil {
		return 0
	}
	return k.Buffering.LargeRecordCopies(cfg.Compression)
}

// StreamCompression is the compression to wrap cfg's encoder output in,
// for NewCompressor: cfg.Compression for the text formats, and none for
// avro and parquet, which compress blocks and pages inside the file with
// the same setting.
func (k Kind) StreamCompression(cfg Options) string {
	if k.CompressesInside {
		return "none"
	}
	return cfg.Compression
}

// CSV is the kind of CSV files: one row a record, format.fields its
// columns.
func CSV() Kind { return Kind{Name: "csv", Ext: "csv", New: newCSV} }

// Bytes is the kind of files of raw values, separated by
// format.bytes_separator.
func Bytes() Kind { return Kind{Name: "bytes", Ext: "bin", ValueOnly: true, New: newBytes} }

func newCSV(cfg Options, w io.Writer, _ Memory) (Encoder, error) {
	return newCSVEncoder(cfg, NewOutput(w, "csv"))
}

func newBytes(cfg Options, w io.Writer, _ Memory) (Encoder, error) {
	return newBytesEncoder(cfg, NewOutput(w, "bytes"))
}
