// Package jsonscan checks and compacts JSON text in one pass and without
// allocating, for the json and jsonl encoders (package jsonfmt) and the
// registry-typed text encoders (format.Typed), which both embed values that
// are already JSON. It is a leaf apart from both because Typed stays in
// package format while the JSON encoders import it.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// Scan reports whether b is exactly one JSON value that encoding/json
// accepts, in valid UTF-8, and whether it holds a line break: outside its
// strings, since inside them a raw line break is not JSON.
//
// It is the check every JSON value passes on its way into a json or jsonl
// file, so it answers all three questions in one scan: fastjson's validator
// plus utf8.Valid and a search for line breaks cost about 1.5 times as much
// (BenchmarkValid*), most of it in fastjson's byte-at-a-time check of
// strings for control characters. Strings, most of a typical value, are
// scanned with vector searches and eight bytes at a time. FuzzScanJSON
// holds it to encoding/json.
func Scan(b []byte) (ok, multiline bool) {
	s := jsonScanner{b: b}
	return s.value() && s.i == len(b), s.multiline
}

// Compactor takes the whitespace out of valid JSON, as json.Compact does,
// in as many pieces as it is given: it carries whether a piece ends inside
// a string, and after a backslash. The zero Compactor starts outside any
// string.
type Compactor struct {
	inString, escaped bool
}

// Append appends b, a piece of valid JSON, to dst without its whitespace.
func (c *Compactor) Append(dst, b []byte) []byte {
	start := 0
	for i, ch := range b {
		switch {
		case c.inString:
			switch {
			case c.escaped:
				c.escaped = false
			case ch == '\\':
				c.escaped = true
			case ch == '"':
				c.inString = false
			}
		case ch == '"':
			c.inString = true
		case isSpace(rune(ch)):
			dst = append(dst, b[start:i]...)
			start = i + 1
		}
	}
	return append(dst, b[start:]...)
}

// Maybe is a cheap filter in front of Scan: most plain text fails on its
// first or last byte already, where Scan could read a long string or
// number before it fails. It never rejects valid JSON.
func Maybe(b []byte) bool {
	b = bytes.TrimFunc(b, isSpace)
	if len(b) == 0 {
		return false
	}
	first, last := b[0], b[len(b)-1]
	switch {
	case first == '{', first == '[':
		return last == '}' || last == ']'
	case first == '"':
		return last == '"'
	case first == '-', first >= '0' && first <= '9':
		return last >= '0' && last <= '9'
	case first == 't', first == 'f':
		return last == 'e'
	case first == 'n':
		return last == 'l'
	}
	return false
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// maxJSONDepth is encoding/json's nesting limit: deeper is invalid there,
// so it is here.
const maxJSONDepth = 10000

type jsonScanner struct {
	b         []byte
	i         int
	multiline bool
}

// value scans one value, with the whitespace around it. Nesting is kept on
// an explicit stack, not in recursion, so a hostile value can't grow the
// goroutine's stack: one entry per open array or object.
func (s *jsonScanner) value() bool {
	var buf [64]bool
	stack := buf[:0] // true: an object
	s.space()
	for {
		// A value starts at s.i.
		if s.i >= len(s.b) {
			return false
		}
		switch c := s.b[s.i]; c {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return false
			}
			s.i++
			s.space()
			if s.i < len(s.b) && s.b[s.i] == c+2 { // '}' or ']'
				s.i++
				break
			}
			stack = append(stack, c == '{')
			if c == '{' && !s.key() {
				return false
			}
			continue
		case '"':
			if !s.str() {
				return false
			}
		case 't':
			if !s.literal("true") {
				return false
			}
		case 'f':
			if !s.literal("false") {
				return false
			}
		case 'n':
			if !s.literal("null") {
				return false
			}
		default:
			if !s.number() {
				return false
			}
		}
		// A value ended: close what it ends, then expect the next one.
		for {
			s.space()
			if len(stack) == 0 {
				return true
			}
			if s.i >= len(s.b) {
				return false
			}
			obj := stack[len(stack)-1]
			c := s.b[s.i]
			if c == ',' {
				s.i++
				s.space()
				if obj && !s.key() {
					return false
				}
				break
			}
			if obj && c != '}' || !obj && c != ']' {
				return false
			}
			s.i++
			stack = stack[:len(stack)-1]
		}
	}
}

// key scans an object's key and its colon, and the space up to its value.
func (s *jsonScanner) key() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
		return false
	}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return false
	}
	s.i++
	s.space()
	return true
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t':
		case '\n', '\r':
			s.multiline = true
		default:
			return
		}
		s.i++
	}
}

func (s *jsonScanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// str scans a string from its opening quote, in one pass: eight bytes at a
// time while none of them needs a look (a quote, a backslash, a control
// character or a byte of a multi-byte UTF-8 sequence; in a typical value
// only the closing quote does), then the byte that does. An earlier
// version searched for the quote, then for a backslash before it, then
// checked the run between: three passes over each string, and two calls
// per string, which cost more than the pass on the short strings most
// values are made of (BenchmarkScanBenchValue). FuzzScanMatchesOracle
// holds it to that version.
func (s *jsonScanner) str() bool {
	b, i := s.b, s.i+1
	for {
		start := i
		for i+16 <= len(b) {
			m := special(binary.LittleEndian.Uint64(b[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto look
			}
			if m = special(binary.LittleEndian.Uint64(b[i+8:])); m != 0 {
				i += 8 + bits.TrailingZeros64(m)>>3
				goto look
			}
			i += 16
			if i-start >= 32 {
				// A long string: its end is found faster by a vector
				// search, then the run up to it checked without quotes.
				q := bytes.IndexByte(b[i:], '"')
				if q < 0 {
					return false
				}
				i = unquoted(b, i, i+q)
				goto look
			}
		}
		if i+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto look
			}
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
	look:
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
		default:
			i++ // a plain byte that the word loop stopped short of
		}
	}
}

// unquoted returns the index of the first byte of b[i:end] that is a
// backslash, below 0x20 or from 0x80 on, or end if none is; b[end] is a
// quote.
func unquoted(b []byte, i, end int) int {
	for ; i+16 <= end; i += 16 {
		x, y := binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
		e, f := x^bslash, y^bslash
		mx := ((x - 0x20*ones) | x | (e-ones)&^e) & highs
		my := ((y - 0x20*ones) | y | (f-ones)&^f) & highs
		if mx|my != 0 {
			if mx != 0 {
				return i + bits.TrailingZeros64(mx)>>3
			}
			return i + 8 + bits.TrailingZeros64(my)>>3
		}
	}
	for ; i+8 <= end; i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		e := x ^ bslash
		if m := ((x - 0x20*ones) | x | (e-ones)&^e) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < end && plain[b[i]] {
		i++
	}
	return i
}

// Word-at-a-time masks: eight copies of a byte.
const (
	ones   = 0x0101010101010101
	highs  = 0x8080808080808080
	quotes = '"' * ones
	bslash = '\\' * ones
)

// special sets the top bit of the lowest byte of x that is a quote, a
// backslash, below 0x20 or from 0x80 on, or returns 0 if none is. Bytes
// above the lowest such one may be marked wrongly (a borrow carries into
// them), so only the lowest mark counts.
func special(x uint64) uint64 {
	q := x ^ quotes
	e := x ^ bslash
	return ((x - 0x20*ones) | x | (q-ones)&^q | (e-ones)&^e) & highs
}

// plain marks the bytes that str passes over without a look.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	s.i = i
	return true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
