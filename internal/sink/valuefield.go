package sink

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FieldReader reads the fields of a record's value that the template
// splits files by ({{value_field}}, naming.Template.FieldPaths), in that
// order, into dst[:0]: nil for a null or absent field. An error is the
// record's (it can't be placed): the error policy decides.
type FieldReader interface {
	Fields(r *kgo.Record, dst []any) ([]any, error)
}

// readFields reads r's value fields into s.fieldBuf for vars, when the
// template has any; an error is the record's, for the error policy.
// router.mu held.
func (s *Sink) readFields(r *kgo.Record) error {
	if len(s.cfg.Template.FieldPaths()) == 0 {
		return nil
	}
	if s.cfg.Fields == nil {
		return fmt.Errorf("record %s/%d@%d: the file name template splits files by value fields, but no schema registry reads them", r.Topic, r.Partition, r.Offset)
	}
	var err error
	s.fieldBuf, err = s.cfg.Fields.Fields(r, s.fieldBuf)
	if err == nil {
		err = s.cfg.Template.CheckFields(s.fieldBuf)
		if err != nil {
			err = fmt.Errorf("%w: record %s/%d@%d: %w", s.cfg.ErrRecord, r.Topic, r.Partition, r.Offset, err)
		}
	}
	return err
}
