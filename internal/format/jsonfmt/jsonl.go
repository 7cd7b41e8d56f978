package jsonfmt

import (
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
)

// jsonlEncoder writes JSON Lines: one record per line, each a JSON object
// (envelope) or the bare value of the one configured field.
type jsonlEncoder struct {
	out format.Output
	rec jsonRecord
}

func (e *jsonlEncoder) Encode(r *kgo.Record) error {
	if err := e.out.Check(); err != nil {
		return err
	}
	if e.rec.large(r) {
		return e.rec.stream(&e.out, "", r, "\n")
	}
	b, err := e.rec.append(e.out.Buf(), r)
	if err != nil {
		e.out.Keep(b)
		return err
	}
	return e.out.Send(append(b, '\n'))
}

// Close has no trailer to write: a JSON Lines file is complete after any
// line.
func (e *jsonlEncoder) Close() error {
	return e.out.Close()
}

// Reset starts a new file on w after Close ended the last.
func (e *jsonlEncoder) Reset(w io.Writer) error {
	return e.out.Reset(w)
}
