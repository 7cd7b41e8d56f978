package jsonfmt

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
)

// jsonEncoder writes one JSON array per file, one record per line:
//
//	[
//	{"key":...},
//	{"key":...}
//	]
//
// as Aiven's "json" output type does. The opening bracket goes out with the
// first record, so a record error before it leaves the file empty, and an
// empty file is closed as "[]".
type jsonEncoder struct {
	out format.Output
	rec jsonRecord
	n   int64 // records written
}

func (e *jsonEncoder) Encode(r *kgo.Record) error {
	if err := e.out.Check(); err != nil {
		return err
	}
	head := ",\n"
	if e.n == 0 {
		head = "[\n"
	}
	if e.rec.large(r) {
		if err := e.rec.stream(&e.out, head, r, ""); err != nil {
			return err
		}
		e.n++
		return nil
	}
	b, err := e.rec.append(append(e.out.Buf(), head...), r)
	if err != nil {
		e.out.Keep(b)
		return err
	}
	if err := e.out.Send(b); err != nil {
		return err
	}
	e.n++
	return nil
}

// Close writes the closing bracket. It does not close the underlying writer.
func (e *jsonEncoder) Close() error {
	if err := e.out.Check(); err != nil {
		if errors.Is(err, format.ErrClosed) {
			return nil
		}
		return err
	}
	trailer := "\n]\n"
	if e.n == 0 {
		trailer = "[]\n"
	}
	err := e.out.Send(append(e.out.Buf(), trailer...))
	_ = e.out.Close() // its error, if any, is err
	return err
}
