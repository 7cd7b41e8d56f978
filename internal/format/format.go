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
// This package holds csv, bytes and what every format shares (the Encoder
// interface, Kind, Memory, Output, the fields and the envelope, Typed);
// jsonl and json (package jsonfmt), avro and parquet are packages of their
// own, and package formats is the table of all kinds, which callers look
// formats up in.
package format

import (
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"
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

// Output is the write side shared by the text encoders (here and in
// package jsonfmt): one reusable buffer, one Write per record (a record
// with a large field goes down in pieces, see Put), and a sticky error once
// the underlying writer fails. The zero Output has no writer: build one
// with NewOutput.
type Output struct {
	w      io.Writer
	name   string // format name, for error messages
	buf    []byte
	err    error // first write error, returned forever after
	closed bool
}

// NewOutput is an Output writing to w for the format name.
func NewOutput(w io.Writer, name string) Output { return Output{w: w, name: name} }

// Check reports whether the output can still take a record.
func (o *Output) Check() error {
	if o.err != nil {
		return o.err
	}
	if o.closed {
		return ErrClosed
	}
	return nil
}

// Buf is the reusable buffer, empty, to build the next record in.
func (o *Output) Buf() []byte { return o.buf[:0] }

// Keep takes b back as the reusable buffer, unless it grew too large.
func (o *Output) Keep(b []byte) {
	if cap(b) > MaxRetainedBuffer {
		o.buf = nil
		return
	}
	o.buf = b[:0]
}

// Send hands b to the underlying writer in a single call, and keeps b's
// storage for the next record.
func (o *Output) Send(b []byte) error {
	err := o.Put(b)
	o.Keep(b)
	return err
}

// Put hands b to the underlying writer; an error sticks.
func (o *Output) Put(b []byte) error {
	if _, err := o.w.Write(b); err != nil {
		o.err = fmt.Errorf("format: writing %s output: %w", o.name, err)
		return o.err
	}
	return nil
}

// Err is the first write error, if any.
func (o *Output) Err() error { return o.err }

// Close ends the file: Check reports ErrClosed from now on. It returns
// the first write error, if any, and does not close the underlying writer.
func (o *Output) Close() error {
	o.closed = true
	return o.err
}

// Reset starts a new file on w after Close ended the last.
func (o *Output) Reset(w io.Writer) error {
	if !o.closed {
		return ErrNotClosed
	}
	o.w, o.err, o.closed = w, nil, false
	return nil
}

// Base64Values reads format.value_encoding, the one rule for every
// encoder: base64 (true) or none (false).
func Base64Values(cfg Options) (bool, error) {
	switch cfg.ValueEncoding {
	case "", "none":
		return false, nil
	case "base64":
		return true, nil
	}
	return false, fmt.Errorf("format.value_encoding %q is unknown; valid: none, base64", cfg.ValueEncoding)
}
