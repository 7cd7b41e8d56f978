package jsonfmt

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/jsonscan"
)

// large reports whether r holds a key, value or header value of streamMin
// bytes or more: then it is streamed, not appended.
func (j *jsonRecord) large(r *kgo.Record) bool {
	if len(r.Key) >= j.streamMin || len(r.Value) >= j.streamMin {
		return true
	}
	for _, h := range r.Headers {
		if len(h.Value) >= j.streamMin {
			return true
		}
	}
	return false
}

// stream writes head, r and tail to o as append would build them, but
// hands its large fields down in pieces: the record is never built whole,
// and what it costs beyond its own bytes is one piece. Everything that could
// make r a record error is checked first, so that a record error still
// leaves nothing in the output. Only a failed write can stop it halfway,
// and that breaks the file anyway.
func (j *jsonRecord) stream(o *format.Output, head string, r *kgo.Record, tail string) error {
	keyForm, valueForm, err := j.check(r)
	if err != nil {
		return err
	}
	s := streamer{o: o, j: j, buf: append(o.Buf(), head...)}
	for i, f := range j.fields {
		if j.envelope {
			s.buf = append(s.buf, j.prefixes[i]...)
		}
		switch f {
		case format.FieldKey:
			s.field(r.Key, keyForm)
		case format.FieldValue:
			s.field(r.Value, valueForm)
		case format.FieldOffset:
			s.buf = strconv.AppendInt(s.buf, r.Offset, 10)
		case format.FieldTimestamp:
			s.buf = strconv.AppendInt(s.buf, r.Timestamp.UnixMilli(), 10)
		case format.FieldPartition:
			s.buf = strconv.AppendInt(s.buf, int64(r.Partition), 10)
		case format.FieldHeaders:
			s.buf = append(s.buf, '[')
			for i, h := range r.Headers {
				if i > 0 {
					s.buf = append(s.buf, ',')
				}
				s.buf = append(s.buf, `{"key":`...)
				s.buf = appendString(s.buf, h.Key)
				s.buf = append(s.buf, `,"value":`...)
				s.field(h.Value, j.formOf(h.Value, false))
				s.buf = append(s.buf, '}')
			}
			s.buf = append(s.buf, ']')
		}
	}
	if j.envelope {
		s.buf = append(s.buf, '}')
	}
	s.buf = append(s.buf, tail...)
	s.flush()
	o.Keep(s.buf)
	return o.Err()
}

// check finds the error append would report for r, if any, and how its key
// and value are written.
func (j *jsonRecord) check(r *kgo.Record) (keyForm, valueForm form, err error) {
	for _, f := range j.fields {
		switch f {
		case format.FieldKey:
			if keyForm = j.formOf(r.Key, false); keyForm == formInvalid {
				return 0, 0, format.NotUTF8("key", r)
			}
		case format.FieldValue:
			if valueForm = j.formOf(r.Value, true); valueForm == formInvalid {
				return 0, 0, format.NotUTF8("value", r)
			}
		case format.FieldHeaders:
			// The checks of appendHeaders, in its order.
			for _, h := range r.Headers {
				if !utf8.ValidString(h.Key) {
					return 0, 0, headerKeyError(h.Key, r)
				}
				if j.formOf(h.Value, false) == formInvalid {
					return 0, 0, format.NotUTF8("value of header "+strconv.Quote(h.Key), r)
				}
			}
		}
	}
	return keyForm, valueForm, nil
}

// streamer writes one record through o: small parts gather in buf, a
// large field goes down in pieces of about j.streamPiece bytes of input.
type streamer struct {
	o   *format.Output
	j   *jsonRecord
	buf []byte
}

func (s *streamer) flush() {
	if len(s.buf) > 0 && s.o.Err() == nil {
		_ = s.o.Put(s.buf)
	}
	s.buf = s.buf[:0]
}

func (s *streamer) field(b []byte, f form) {
	if len(b) < s.j.streamMin || f == formNull {
		s.buf, _ = s.j.appendForm(s.buf, b, f)
		return
	}
	piece := max(s.j.streamPiece, 4) // room for any UTF-8 sequence
	switch f {
	case formRaw:
		s.flush()
		for len(b) > 0 && s.o.Err() == nil {
			n := min(len(b), piece)
			_ = s.o.Put(b[:n])
			b = b[n:]
		}
	case formCompact:
		var c jsonscan.Compactor
		for len(b) > 0 {
			n := min(len(b), piece)
			s.buf = c.Append(s.buf, b[:n])
			s.flush()
			b = b[n:]
		}
	case formString:
		s.buf = append(s.buf, '"')
		for len(b) > 0 {
			n := min(len(b), piece)
			// Cut between whole UTF-8 sequences (b is valid UTF-8).
			for n < len(b) && !utf8.RuneStart(b[n]) {
				n--
			}
			s.buf = appendEscaped(s.buf, b[:n])
			s.flush()
			b = b[n:]
		}
		s.buf = append(s.buf, '"')
	case formBase64:
		s.buf = append(s.buf, '"')
		piece := piece / 3 * 3 // no padding inside the string
		for len(b) > 0 {
			n := min(len(b), piece)
			s.buf = base64.StdEncoding.AppendEncode(s.buf, b[:n])
			s.flush()
			b = b[n:]
		}
		s.buf = append(s.buf, '"')
	}
}
