// Package format turns Kafka records into file bytes: an Encoder writes
// records in the configured file format (jsonl, json, csv, bytes, avro,
// parquet) and a compressor wraps the output stream. Both are plain
// io.Writer stages, so a file is one chain (avro and parquet compress
// inside the file, and their stream compressor is "none": see
// Kind.StreamCompression):
//
//	Encoder ▸ NewCompressor ▸ storage writer
//
// Every stage's Close finishes its own bytes (a "]" trailer, a gzip footer)
// but never closes the writer below it: the caller closes each stage in
// order, top first, and alone decides when the file is complete.
//
// A record the format cannot represent (binary bytes where text is needed)
// is reported as an error wrapping ErrRecord, and leaves nothing in the
// output, so the caller can apply the error policy (fail, skip, dead-letter)
// and keep writing the same file. Any other error means the output is
// broken and the file must be abandoned.
//
// Encoders and compressors are not safe for concurrent use: one goroutine
// owns a file's chain.
//
// This package holds the text formats and what every format shares (the
// Encoder interface, Kind, Memory, the envelope, Typed); avro and parquet
// are packages of their own, and package formats is the table of all
// kinds, which callers look formats up in.
package format

import (
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
)

// ErrRecord marks a record that cannot be encoded in the configured format.
// Errors wrapping it name the record's offset and the fix; test with
// errors.Is. Nothing of such a record reaches the output.
var ErrRecord = errors.New("record cannot be encoded")

// ErrClosed is returned by Encode after Close, ErrNotClosed by Reset
// before it.
var (
	ErrClosed    = errors.New("format: encoder is closed")
	ErrNotClosed = errors.New("format: encoder reset before it was closed")
)

// Encoder writes records to an io.Writer in one file format. It is
// declared here, once, for every package that takes one.
type Encoder interface {
	// Encode writes one record. An error wrapping ErrRecord means this
	// record was skipped and the encoder is still usable; any other error
	// (from the underlying writer) is permanent and the file is broken.
	Encode(r *kgo.Record) error
	// Close writes the format's trailer, if any. It does not close the
	// underlying writer.
	Close() error
}

// MaxRetainedBuffer bounds the encode buffer an encoder keeps between
// records. A larger record gets a buffer of its own that is dropped after
// the write, so one huge record does not pin its size in every open file
// (the budget counts open files, not their history).
const MaxRetainedBuffer = 64 << 10

// output is the write side shared by the encoders: one reusable buffer, one
// Write per record (a record with a large field goes down in pieces, see
// jsonRecord.stream), and a sticky error once the underlying writer fails.
type output struct {
	w      io.Writer
	name   string // format name, for error messages
	buf    []byte
	err    error // first write error, returned forever after
	closed bool
}

// check reports whether the output can still take a record.
func (o *output) check() error {
	if o.err != nil {
		return o.err
	}
	if o.closed {
		return ErrClosed
	}
	return nil
}

// keep takes b back as the reusable buffer, unless it grew too large.
func (o *output) keep(b []byte) {
	if cap(b) > MaxRetainedBuffer {
		o.buf = nil
		return
	}
	o.buf = b[:0]
}

// write hands b to the underlying writer in a single call, and keeps b's
// storage for the next record.
func (o *output) write(b []byte) error {
	err := o.put(b)
	o.keep(b)
	return err
}

// put hands b to the underlying writer; an error sticks.
func (o *output) put(b []byte) error {
	if _, err := o.w.Write(b); err != nil {
		o.err = fmt.Errorf("format: writing %s output: %w", o.name, err)
		return o.err
	}
	return nil
}

// base64Values reads format.value_encoding, the one rule for every
// encoder: base64 (true) or none (false).
func base64Values(cfg config.Format) (bool, error) {
	switch cfg.ValueEncoding {
	case "", "none":
		return false, nil
	case "base64":
		return true, nil
	}
	return false, fmt.Errorf("format.value_encoding %q is unknown; valid: none, base64", cfg.ValueEncoding)
}
