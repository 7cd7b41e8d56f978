package format

import (
	"io"

	"github.com/twmb/franz-go/pkg/kgo"
)

// jsonlEncoder writes JSON Lines: one record per line, each a JSON object
// (envelope) or the bare value of the one configured field.
type jsonlEncoder struct {
	out output
	rec jsonRecord
}

func (e *jsonlEncoder) Encode(r *kgo.Record) error {
	if err := e.out.check(); err != nil {
		return err
	}
	if e.rec.large(r) {
		return e.rec.stream(&e.out, "", r, "\n")
	}
	b, err := e.rec.append(e.out.buf[:0], r)
	if err != nil {
		e.out.keep(b)
		return err
	}
	return e.out.write(append(b, '\n'))
}

// Close has no trailer to write: a JSON Lines file is complete after any
// line.
func (e *jsonlEncoder) Close() error {
	e.out.closed = true
	return e.out.err
}

// Reset starts a new file on w after Close ended the last.
func (e *jsonlEncoder) Reset(w io.Writer) error {
	if !e.out.closed {
		return ErrNotClosed
	}
	e.out.w, e.out.err, e.out.closed = w, nil, false
	return nil
}
