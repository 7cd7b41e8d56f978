package format

import (
	"encoding/base64"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// bytesEncoder writes Confluent's ByteArrayFormat: each record's value as it
// is, followed by format.bytes_separator ("\n" by default, as Confluent's
// System.lineSeparator() on Linux). Nothing else of the record is written,
// and nothing is escaped: a value that holds the separator reads back as
// several records, as with Confluent.
//
// A null value reaches the encoder only with errors.null_values: write (the
// sink drops or refuses it before, with ignore or fail), and is written as
// an empty value: the separator alone. (Confluent stops on it by default,
// and its behavior.on.null.values=write puts tombstones in files of their
// own.)
//
// With format.value_encoding: base64 each value is written in base64
// instead, which makes any bytes safe to split on a line break.
type bytesEncoder struct {
	out    Output
	sep    []byte
	base64 bool
}

func newBytesEncoder(cfg Options, out Output) (*bytesEncoder, error) {
	e := &bytesEncoder{out: out}
	var err error
	if e.base64, err = Base64Values(cfg); err != nil {
		return nil, err
	}
	sep, err := cfg.Separator()
	if err != nil {
		return nil, fmt.Errorf("format.bytes_separator %q %w", cfg.BytesSeparator, err)
	}
	e.sep = sep
	return e, nil
}

// Encode can't meet a record error: any bytes are a value. A raw value is
// handed to the writer as it is, without a copy, so a large one costs no
// memory here.
func (e *bytesEncoder) Encode(r *kgo.Record) error {
	if err := e.out.Check(); err != nil {
		return err
	}
	if e.base64 {
		b := base64.StdEncoding.AppendEncode(e.out.Buf(), r.Value)
		return e.out.Send(append(b, e.sep...))
	}
	if len(r.Value) > 0 {
		if err := e.writeRaw(r.Value); err != nil {
			return err
		}
	}
	if len(e.sep) > 0 {
		return e.writeRaw(e.sep)
	}
	return nil
}

func (e *bytesEncoder) writeRaw(b []byte) error {
	if _, err := e.out.w.Write(b); err != nil {
		e.out.err = fmt.Errorf("format: writing %s output: %w", e.out.name, err)
		return e.out.err
	}
	return nil
}

// Close has no trailer to write: every value ends in its own separator.
func (e *bytesEncoder) Close() error {
	return e.out.Close()
}
