package jsonfmt

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/jsonscan"
)

// jsonRecord renders one record as JSON, as the jsonl and json formats
// share it. It appends to a caller's buffer and allocates nothing per record
// on the common path.
type jsonRecord struct {
	fields   []format.Field
	prefixes []string // `{"key":`, `,"value":`, ...; empty without envelope
	envelope bool
	base64   bool // value_encoding base64: bytes become base64 strings
	// streamMin is the size from which a key, value or header value is
	// written through in pieces of streamPiece bytes (see stream), not
	// appended whole. Tests make them small.
	streamMin, streamPiece int
}

// A record that holds a field of defaultStreamMin bytes or more is written
// through to the output in pieces of about defaultStreamPiece bytes of
// input, instead of being built whole in the encode buffer. Such a record
// may be larger than the memory budget's room, and it is held over the
// limit while it is written (see budget.Plan): building it whole would add a
// copy of it, 1.33 times its size in base64.
const (
	defaultStreamMin   = 64 << 10
	defaultStreamPiece = 32 << 10
)

func newJSONRecord(cfg config.Format) (jsonRecord, error) {
	rec := jsonRecord{envelope: cfg.Envelope, streamMin: defaultStreamMin, streamPiece: defaultStreamPiece}
	var err error
	if rec.base64, err = format.Base64Values(cfg); err != nil {
		return jsonRecord{}, err
	}
	if rec.fields, err = format.ParseFields(cfg.Fields); err != nil {
		return jsonRecord{}, err
	}
	if !cfg.Envelope && len(rec.fields) != 1 {
		return jsonRecord{}, fmt.Errorf("format.envelope: false writes one bare field per record, but format.fields lists %d (%s); list one field or set envelope: true",
			len(cfg.Fields), strings.Join(cfg.Fields, ", "))
	}
	if cfg.Envelope {
		for i, f := range rec.fields {
			sep := ","
			if i == 0 {
				sep = "{"
			}
			rec.prefixes = append(rec.prefixes, sep+`"`+format.FieldNames[f]+`":`)
		}
	}
	return rec, nil
}

// append appends r as JSON (without a line break) to dst. On error the
// returned slice is dst's storage, for reuse, and must not be written.
func (j *jsonRecord) append(dst []byte, r *kgo.Record) ([]byte, error) {
	dst = slices.Grow(dst, j.sizeHint(r))
	var err error
	for i, f := range j.fields {
		if j.envelope {
			dst = append(dst, j.prefixes[i]...)
		}
		switch f {
		case format.FieldKey:
			var ok bool
			if dst, ok = j.appendBytes(dst, r.Key, false); !ok {
				err = format.NotUTF8("key", r)
			}
		case format.FieldValue:
			var ok bool
			if dst, ok = j.appendBytes(dst, r.Value, true); !ok {
				err = format.NotUTF8("value", r)
			}
		case format.FieldOffset:
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case format.FieldTimestamp:
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case format.FieldPartition:
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case format.FieldHeaders:
			dst, err = j.appendHeaders(dst, r)
		}
		if err != nil {
			return dst[:0], err
		}
	}
	if j.envelope {
		dst = append(dst, '}')
	}
	return dst, nil
}

// sizeHint is a fair guess at the encoded size, so a large record grows the
// buffer once instead of doubling its way up.
func (j *jsonRecord) sizeHint(r *kgo.Record) int {
	n := 96 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 24 + len(h.Key) + len(h.Value)
	}
	if j.base64 {
		n += n / 3
	}
	return n
}

// form is how a key, value or header value is written.
type form uint8

const (
	formNull    form = iota // null
	formBase64              // a base64 string (value_encoding: base64)
	formRaw                 // JSON, embedded as is
	formCompact             // JSON with line breaks, embedded on one line
	formString              // UTF-8 text, as a JSON string
	formInvalid             // not UTF-8: can only be written as base64
)

// formOf says how b is written. raw allows a value that is already JSON to
// be embedded; keys and headers always stay strings, so readers see one type
// per field.
func (j *jsonRecord) formOf(b []byte, raw bool) form {
	switch {
	case b == nil:
		return formNull
	case j.base64:
		return formBase64
	}
	if raw && jsonscan.Maybe(b) {
		switch ok, multiline := jsonscan.Scan(b); {
		case ok && multiline:
			// Pretty-printed JSON: a line break would split the JSON
			// Lines record, so put it on one line.
			return formCompact
		case ok:
			return formRaw
		}
	}
	if !utf8.Valid(b) {
		return formInvalid
	}
	return formString
}

// appendBytes appends a key, value or header value, or reports false if b
// is not valid UTF-8 and can't be written without base64.
func (j *jsonRecord) appendBytes(dst, b []byte, raw bool) ([]byte, bool) {
	return j.appendForm(dst, b, j.formOf(b, raw))
}

func (j *jsonRecord) appendForm(dst, b []byte, f form) ([]byte, bool) {
	switch f {
	case formNull:
		return append(dst, "null"...), true
	case formBase64:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"'), true
	case formRaw:
		return append(dst, b...), true
	case formCompact:
		var c jsonscan.Compactor
		return c.Append(dst, b), true
	case formString:
		return appendString(dst, b), true
	}
	return dst, false
}

// appendHeaders appends [{"key":"k","value":"v"},...]. Header keys are
// strings; header values are encoded like record keys.
func (j *jsonRecord) appendHeaders(dst []byte, r *kgo.Record) ([]byte, error) {
	dst = append(dst, '[')
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		if !utf8.ValidString(h.Key) {
			return dst, headerKeyError(h.Key, r)
		}
		dst = append(dst, `{"key":`...)
		dst = appendString(dst, h.Key)
		dst = append(dst, `,"value":`...)
		var ok bool
		if dst, ok = j.appendBytes(dst, h.Value, false); !ok {
			return dst, format.NotUTF8("value of header "+strconv.Quote(h.Key), r)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

// headerKeyError is the error for a header key that is not UTF-8.
func headerKeyError(key string, r *kgo.Record) error {
	return fmt.Errorf("%w: header key %q at offset %d is not valid UTF-8", format.ErrRecord, key, r.Offset)
}

// safeASCII marks the ASCII bytes a JSON string holds unescaped.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString appends s, which must be valid UTF-8, as a JSON string
// escaped by encoding/json's rules: short escapes for \" \\ \b \f \n \r \t,
// \u00XX for other control characters, and \u2028 \u2029 (which break
// JavaScript). Unlike json.Marshal it leaves <, > and & alone: the output is
// a data file, not HTML. It is hand-rolled because json.Marshal of a string
// allocates on every call.
func appendString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendEscaped appends s escaped as the inside of a JSON string (see
// appendString). s must hold whole UTF-8 sequences: a piece cut elsewhere
// could split U+2028 and leave it unescaped.
func appendEscaped[S string | []byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
		if c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xa8 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xf])
			i += 3
			start = i
			continue
		}
		i++
	}
	return append(dst, s[start:]...)
}
