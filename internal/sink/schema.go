package sink

import (
	"io"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReasonSchema: the partition's next record has other registry schemas
// than its open file, whose columns are those of its first record.
const ReasonSchema Reason = "schema"

// Schemas types files by the schema-registry schemas of their records
// (format.Typed). It only reads schemas resolved before Write: it never
// waits on the registry, since it runs under the sink's lock.
type Schemas interface {
	// Of names the schemas r must be written with, or "" when r fits
	// any file (it has none, or the format does not type files).
	Of(r *kgo.Record) string
	// NewEncoder builds the encoder of a file of the schemas Of named.
	NewEncoder(w io.Writer, schemas string) (Encoder, error)
}

// schemaChanged reports whether r can't go in f, whose schemas differ.
func (s *Sink) schemaChanged(f *openFile, r *kgo.Record) bool {
	if s.cfg.Schemas == nil {
		return false
	}
	of := s.cfg.Schemas.Of(r)
	return of != "" && of != f.schemas
}

// newEncoder builds a file's encoder for its first record r, and names
// the schemas it is typed with.
func (s *Sink) newEncoder(w io.Writer, r *kgo.Record) (Encoder, string, error) {
	if s.cfg.Schemas == nil {
		enc, err := s.cfg.NewEncoder(w)
		return enc, "", err
	}
	of := s.cfg.Schemas.Of(r)
	enc, err := s.cfg.Schemas.NewEncoder(w, of)
	return enc, of, err
}
