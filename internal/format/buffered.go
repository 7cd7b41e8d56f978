package format

import (
	"io"

	"github.com/spillway/spillway/internal/config"
)

// Memory says how an avro or parquet encoder bounds and counts what it
// buffers: the open block or row group (encoded values, compressed pages)
// is the part of an open file's memory that grows with its records, so it
// is counted as it grows, not guessed, and cut at a byte threshold the
// caller derives from the budget. See docs/design.md, "Memory of the typed
// formats".
type Memory struct {
	// FlushBytes is the size at which the open block or row group is
	// written out: encoded bytes for avro, parquet-go's estimate of the row
	// group (compressed pages plus values not yet in a page) for parquet.
	// 0 means DefaultFlushBytes.
	FlushBytes int64
	// Grow, when set, is told every change in what the encoder buffers
	// beyond FixedMemory: positive as a block or row group grows, negative
	// as it is written out. After Close the changes sum to zero. It is
	// called on the goroutine that calls Encode and Close.
	Grow func(delta int64)
}

// NewBufferedEncoder is NewEncoder with m for the formats that buffer
// blocks or row groups (avro, parquet); the others hold no more than a
// record and ignore m.
func NewBufferedEncoder(cfg config.Format, w io.Writer, m Memory) (Encoder, error) {
	switch cfg.Type {
	case "avro":
		return newAvroFile(cfg, w, m)
	case "parquet":
		return newParquetEncoder(cfg, w, m)
	}
	return NewEncoder(cfg, w)
}

// Thresholds of the buffering formats: a block or row group is cut at half
// of an open file's share of the budget, within these bounds. Parquet row
// groups smaller than 1 MiB cost readers more in metadata than they save,
// and above 64 MiB gain nothing; Avro blocks compress no better past 1 MiB
// (each is compressed on its own) and need not be larger.
const (
	parquetMinFlush = 1 << 20
	parquetMaxFlush = 64 << 20
	avroMinFlush    = 64 << 10
	avroMaxFlush    = 1 << 20
)

// DefaultFlushBytes is the threshold when Memory gives none: 256 KiB
// blocks and 4 MiB row groups.
func DefaultFlushBytes(typ string) int64 {
	switch typ {
	case "avro":
		return avroBlockBytes
	case "parquet":
		return parquetRowGroupBytes
	}
	return 0
}

// FlushBytes is the block or row-group threshold of cfg's format when an
// open file's share of the data budget is perFile bytes (see
// budget.Plan.FileShare): half of it, in the format's bounds. The other
// half is the file's fixed state, its storage writer and its chunk. 0 for
// the formats that don't buffer.
func FlushBytes(cfg config.Format, perFile int64) int64 {
	switch cfg.Type {
	case "avro":
		return min(max(perFile/2, avroMinFlush), avroMaxFlush)
	case "parquet":
		return min(max(perFile/2, parquetMinFlush), parquetMaxFlush)
	}
	return 0
}

// FixedMemory is what one open file's encoder and compressor hold from
// the start, whatever they buffer: the stream compressor for the text
// formats (CompressorMemory); the schema, codec and page state for avro
// and parquet, whose blocks and row groups are counted apart as they grow
// (Memory.Grow). The sink charges it when it opens a file.
func FixedMemory(cfg config.Format) int64 {
	switch cfg.Type {
	case "avro":
		return avroFixed(cfg.Compression)
	case "parquet":
		return parquetFixed
	}
	return CompressorMemory(cfg.Compression)
}

// MaxBuffered is the most an avro or parquet encoder with threshold
// flushBytes buffers (what Memory.Grow adds up to at its peak), with
// records smaller than the threshold: a block or row group just under it,
// the record that crosses it, and for avro the compressed block. 0 for
// the other formats.
func MaxBuffered(cfg config.Format, flushBytes int64) int64 {
	switch cfg.Type {
	case "avro":
		return avroMaxBuffered(flushBytes)
	case "parquet":
		return flushBytes + flushBytes/8 + parquetPageBytes
	}
	return 0
}

// bufferCount is an encoder's side of Memory: its threshold, and what it
// told Grow so far.
type bufferCount struct {
	flush int64
	grow  func(int64)
	// step: changes smaller than this are told with a later one, so that
	// an encoder that sees its size after every record does not take the
	// budget's lock for each (the budget counts the step in FixedMemory).
	step     int64
	reported int64
}

func newBufferCount(m Memory, typ string, step int64) bufferCount {
	flush := m.FlushBytes
	if flush <= 0 {
		flush = DefaultFlushBytes(typ)
	}
	return bufferCount{flush: flush, grow: m.Grow, step: step}
}

// set tells Grow that the encoder now buffers held bytes: at once when it
// is nothing (a block or row group went out), else once it moved by step.
func (c *bufferCount) set(held int64) {
	d := held - c.reported
	if d == 0 || (held != 0 && d < c.step && -d < c.step) {
		return
	}
	c.reported = held
	if c.grow != nil {
		c.grow(d)
	}
}
