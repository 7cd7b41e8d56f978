package format

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Envelope is the record layout that the typed formats (avro, parquet)
// write when no schema registry types the values: the record parts listed
// in format.fields, in that order, as named fields of one record.
//
// The names and the record name follow Aiven's avro and parquet output
// (connector_records with key, value, offset, timestamp, headers), with
// three differences that keep what Kafka holds:
//   - timestamp is a timestamp in milliseconds (a logical type), not a bare
//     long (Aiven's issue #280);
//   - headers are a list of {key, value} records, not a map, because Kafka
//     headers are ordered and may repeat a key;
//   - key and value are bytes or UTF-8 strings by format.value_encoding,
//     since without a registry nothing else tells what they hold.
//
// format.envelope: false writes the one configured field as a record of
// one field, as Aiven does: Avro and Parquet files hold records. Once a
// registry types values, envelope: false with [value] will write the
// value's own schema instead; the envelope is only the schema of last
// resort, so each encoder takes its schema and its record-to-row step from
// here and nothing else.
type Envelope struct {
	Fields []Field
	// text is value_encoding none: key, value and header values are UTF-8
	// strings (a JSON value is kept as a JSON string), and bytes that are
	// not UTF-8 are a record error, as in jsonl. value_encoding base64
	// means the values are binary: the typed formats hold bytes natively,
	// so they write them raw (Avro bytes, Parquet BYTE_ARRAY) rather than
	// as base64 text.
	Text bool
}

// EnvelopeName is the record name, Aiven's; the namespace is ours.
const (
	EnvelopeName      = "connector_records"
	EnvelopeNamespace = "spillway"
)

func NewEnvelope(cfg Options) (Envelope, error) {
	var env Envelope
	b64, err := Base64Values(cfg)
	if err != nil {
		return Envelope{}, err
	}
	env.Text = !b64
	if len(cfg.Fields) == 0 {
		return Envelope{}, fmt.Errorf("format.fields is empty; valid fields: %s", validFields)
	}
	seen := map[Field]bool{}
	for _, name := range cfg.Fields {
		f, ok := parseField(name)
		if !ok {
			return Envelope{}, fmt.Errorf("format.fields: unknown field %q; valid: %s", name, validFields)
		}
		if seen[f] {
			return Envelope{}, fmt.Errorf("format.fields: field %q is listed twice", name)
		}
		seen[f] = true
		env.Fields = append(env.Fields, f)
	}
	if !cfg.Envelope && len(env.Fields) != 1 {
		return Envelope{}, fmt.Errorf("format.envelope: false writes one field per record, but format.fields lists %d (%s); list one field or set envelope: true",
			len(cfg.Fields), strings.Join(cfg.Fields, ", "))
	}
	return env, nil
}

// Check returns an ErrRecord error if r holds something the envelope's
// types can't: a header key that is not UTF-8 (header keys are strings in
// every encoding), or, with text values, a key, value or header value that
// is not UTF-8. Encoders call it before they touch their buffers, so a bad
// record leaves nothing behind.
func (e Envelope) Check(r *kgo.Record) error {
	for _, f := range e.Fields {
		switch f {
		case FieldKey:
			if e.Text && !utf8.Valid(r.Key) {
				return notText("key", r)
			}
		case FieldValue:
			if e.Text && !utf8.Valid(r.Value) {
				return notText("value", r)
			}
		case FieldHeaders:
			for _, h := range r.Headers {
				if !utf8.ValidString(h.Key) {
					return fmt.Errorf("%w: header key %q at offset %d is not valid UTF-8", ErrRecord, h.Key, r.Offset)
				}
				if e.Text && !utf8.Valid(h.Value) {
					return notText("value of header "+strconv.Quote(h.Key), r)
				}
			}
		}
	}
	return nil
}

// RecordBytes is about what r takes encoded, without its framing.
func RecordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

func notText(what string, r *kgo.Record) error {
	return fmt.Errorf("%w: %s at offset %d is not valid UTF-8; set format.value_encoding: base64 to write keys and values as bytes", ErrRecord, what, r.Offset)
}
