package sink

import (
	"io"

	"github.com/spillway/spillway/internal/format"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Schemas types files by the schema-registry schemas of their records
// (format.Typed). It only reads schemas resolved before Write: it never
// waits on the registry, since it runs under the sink's lock.
type Schemas interface {
	// Of names the schemas r must be written with, or "" when r fits
	// any file (it has none, or the format does not type files).
	Of(r *kgo.Record) string
	// Fits says whether a record Of names of may go in a file of the
	// schemas file: a record's part without a usable schema (null, or
	// one that is a record error in any file) fits any file.
	Fits(of, file string) bool
	// NewEncoder builds the encoder of a file of the schemas Of named.
	NewEncoder(w io.Writer, schemas string) (format.Encoder, error)
}

// schemaChanged reports whether r can't go in f, whose schemas differ.
// router.mu held.
func (s *Sink) schemaChanged(f *openFile, r *kgo.Record) bool {
	if s.cfg.Schemas == nil {
		return false
	}
	return !s.cfg.Schemas.Fits(s.cfg.Schemas.Of(r), f.schemas)
}

// schemasOf names the schemas a file opened by r is typed with: "" when
// the sink types no files.
// router.mu held.
func (s *Sink) schemasOf(r *kgo.Record) string {
	if s.cfg.Schemas == nil {
		return ""
	}
	return s.cfg.Schemas.Of(r)
}
