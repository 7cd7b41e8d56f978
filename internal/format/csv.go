package format

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// csvEncoder writes Aiven's "csv" output type (their PlainOutputWriter): one
// row per record, the fields of format.fields in their order, separated by
// commas, with no header row.
//
//   - key: base64 of the key bytes, whatever format.value_encoding says, as
//     Aiven does (a key is often binary, and its column stays one type).
//   - value: base64 with value_encoding base64; with none, the value as it
//     is, which must then be UTF-8 text (anything else is a record error
//     that names base64 as the fix).
//   - offset: the offset in decimal.
//   - timestamp: epoch milliseconds in decimal, as jsonl writes it: -1
//     for a record without one (Kafka's NO_TIMESTAMP), where Aiven, to
//     which Connect hands a null, writes an empty field.
//   - headers: "b64(key):b64(value);" for each header, in record order; a
//     record without headers gets an empty field.
//   - partition: the Kafka partition in decimal (only when listed; Aiven
//     has no such field).
//
// A null key or value is an empty field, as in Aiven's files; an empty one
// (zero bytes, not null) is written "" so that a reader can tell the two
// apart (DuckDB does with allow_quoted_nulls=false). With one field only, a
// null is therefore an empty line: DuckDB given the dialect
// (auto_detect=false) reads it as a NULL row, Go's encoding/csv skips it. A
// null header value is an empty header value ("a2V5:;"); Aiven's task
// fails on one.
//
// Quoting follows encoding/csv's writer (RFC 4180): a field is quoted when
// it holds a comma, a double quote, CR or LF, or starts with a space (and
// the single field `\.`); quotes inside are doubled. Only raw values can
// need it: base64, numbers and headers never do. Aiven quotes nothing, so
// in its files a value with a comma, a quote or a line break breaks the
// row.
//
// Rows end in "\n", the last one too. Aiven puts "\n" between rows only,
// so its files lack the final line break; ours can be concatenated.
type csvEncoder struct {
	out    Output
	fields []Field
	base64 bool // value_encoding base64
}

func newCSVEncoder(cfg Options, out Output) (*csvEncoder, error) {
	e := &csvEncoder{out: out}
	var err error
	if e.base64, err = Base64Values(cfg); err != nil {
		return nil, err
	}
	fields, err := ParseFields(cfg.Fields)
	if err != nil {
		return nil, err
	}
	e.fields = fields
	return e, nil
}

// Encode builds the whole row in the encoder's buffer before writing it, so
// a record error leaves nothing in the output.
func (e *csvEncoder) Encode(r *kgo.Record) error {
	if err := e.out.Check(); err != nil {
		return err
	}
	b, err := e.appendRow(e.out.Buf(), r)
	if err != nil {
		e.out.Keep(b)
		return err
	}
	return e.out.Send(b)
}

func (e *csvEncoder) appendRow(dst []byte, r *kgo.Record) ([]byte, error) {
	n := 48 + len(r.Key)*4/3 + len(r.Value)
	if e.base64 {
		n += len(r.Value) / 3
	}
	for _, h := range r.Headers {
		n += 6 + (len(h.Key)+len(h.Value))*4/3
	}
	if cap(dst) < n {
		dst = make([]byte, 0, n)
	}
	for i, f := range e.fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch f {
		case FieldKey:
			dst = appendCSVBase64(dst, r.Key)
		case FieldValue:
			switch {
			case e.base64:
				dst = appendCSVBase64(dst, r.Value)
			case !utf8.Valid(r.Value):
				return dst[:0], NotUTF8("value", r)
			default:
				dst = appendCSVText(dst, r.Value)
			}
		case FieldOffset:
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case FieldTimestamp:
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case FieldPartition:
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case FieldHeaders:
			for _, h := range r.Headers {
				dst = base64.StdEncoding.AppendEncode(dst, []byte(h.Key))
				dst = append(dst, ':')
				dst = base64.StdEncoding.AppendEncode(dst, h.Value)
				dst = append(dst, ';')
			}
		}
	}
	return append(dst, '\n'), nil
}

// appendCSVBase64 appends b in base64: nothing for null, "" for empty.
// Base64's alphabet never needs quoting.
func appendCSVBase64(dst, b []byte) []byte {
	switch {
	case b == nil:
		return dst
	case len(b) == 0:
		return append(dst, `""`...)
	}
	return base64.StdEncoding.AppendEncode(dst, b)
}

// appendCSVText appends UTF-8 text as a CSV field: nothing for null, ""
// for empty, quoted by encoding/csv's rules where it must be.
func appendCSVText(dst, b []byte) []byte {
	switch {
	case b == nil:
		return dst
	case len(b) == 0:
		return append(dst, `""`...)
	case !csvNeedsQuotes(b):
		return append(dst, b...)
	}
	dst = append(dst, '"')
	for {
		i := bytes.IndexByte(b, '"')
		if i < 0 {
			break
		}
		dst = append(dst, b[:i+1]...)
		dst = append(dst, '"')
		b = b[i+1:]
	}
	dst = append(dst, b...)
	return append(dst, '"')
}

// csvNeedsQuotes is encoding/csv's Writer.fieldNeedsQuotes with a comma
// separator, for a non-empty field.
func csvNeedsQuotes(b []byte) bool {
	if string(b) == `\.` {
		return true
	}
	for _, c := range b {
		if c == ',' || c == '"' || c == '\r' || c == '\n' {
			return true
		}
	}
	r, _ := utf8.DecodeRune(b)
	return unicode.IsSpace(r)
}

// Close has no trailer to write: every row ends in its own line break.
func (e *csvEncoder) Close() error {
	return e.out.Close()
}
