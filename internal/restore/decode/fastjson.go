package decode

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// errShape is a line the fast path does not take: parseEnvelope's caller
// reads it with encoding/json instead, which decides.
var errShape = errors.New("not the envelope's usual shape")

// parseEnvelope reads one jsonl/json line of the envelope as Spillway
// writes it with value_encoding base64: an object whose key and value are
// null or a base64 string, offset and timestamp integers, and headers an
// array of {"key": string, "value": null or base64}. It decodes base64
// straight into the record's slices, without encoding/json's reflection
// and its second pass over the line, which bounded the restore's rate.
// Anything else, a string with an escape included, gives errShape.
func parseEnvelope(b []byte) (*kgo.Record, error) {
	p := envParser{b: b}
	rec := &kgo.Record{}
	var haveOffset, haveTS bool
	if !p.byte('{') {
		return nil, errShape
	}
	for first := true; ; first = false {
		if p.byte('}') {
			break
		}
		if !first && !p.byte(',') {
			return nil, errShape
		}
		name, ok := p.plainString()
		if !ok || !p.byte(':') {
			return nil, errShape
		}
		switch string(name) {
		case "key":
			if rec.Key, ok = p.blob(); !ok {
				return nil, errShape
			}
		case "value":
			if rec.Value, ok = p.blob(); !ok {
				return nil, errShape
			}
		case "offset":
			if rec.Offset, ok = p.int(); !ok {
				return nil, errShape
			}
			haveOffset = true
		case "timestamp":
			var ts int64
			if ts, ok = p.int(); !ok {
				return nil, errShape
			}
			rec.Timestamp, haveTS = time.UnixMilli(ts), true
		case "headers":
			if !p.headers(rec) {
				return nil, errShape
			}
		case "partition":
			// format.fields' partition: the restore picks the partition
			// it writes to, as for files without it.
			if _, ok = p.int(); !ok {
				return nil, errShape
			}
		default:
			return nil, errShape
		}
	}
	if p.i != len(p.b) || !haveOffset || !haveTS {
		return nil, errShape
	}
	return rec, nil
}

type envParser struct {
	b []byte
	i int
}

func (p *envParser) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plainString reads a string without escapes.
func (p *envParser) plainString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// blob reads null (nil) or a base64 string (a non-nil slice, empty for "").
func (p *envParser) blob() ([]byte, bool) {
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return nil, true
	}
	// The closing quote is the first one: base64 has no quote, and
	// Decode refuses anything that is not base64 (an escape, a control
	// character), which then goes to encoding/json.
	if !p.byte('"') {
		return nil, false
	}
	end := bytes.IndexByte(p.b[p.i:], '"')
	if end < 0 {
		return nil, false
	}
	s := p.b[p.i : p.i+end]
	p.i += end + 1
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(out, s)
	if err != nil {
		return nil, false
	}
	return out[:n], true
}

func (p *envParser) int() (int64, bool) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

// headers reads [{"key":"k","value":null|"b64"},...]; a header key with
// an escape is read by encoding/json.
func (p *envParser) headers(rec *kgo.Record) bool {
	if !p.byte('[') {
		return false
	}
	if p.byte(']') {
		return true
	}
	for {
		if !p.byte('{') {
			return false
		}
		var h kgo.RecordHeader
		for _, field := range [2]string{"key", "value"} {
			if field == "value" && !p.byte(',') {
				return false
			}
			name, ok := p.plainString()
			if !ok || string(name) != field || !p.byte(':') {
				return false
			}
			if field == "value" {
				if h.Value, ok = p.blob(); !ok {
					return false
				}
				continue
			}
			if k, ok := p.plainString(); ok {
				h.Key = string(k)
				continue
			}
			if !p.escapedString(&h.Key) {
				return false
			}
		}
		if !p.byte('}') {
			return false
		}
		rec.Headers = append(rec.Headers, h)
		if p.byte(']') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}

// escapedString reads a JSON string with escapes through encoding/json.
func (p *envParser) escapedString(dst *string) bool {
	if !p.byte('"') {
		return false
	}
	start := p.i - 1
	for ; p.i < len(p.b); p.i++ {
		switch p.b[p.i] {
		case '\\':
			p.i++
		case '"':
			p.i++
			return json.Unmarshal(p.b[start:p.i], dst) == nil
		}
	}
	return false
}
