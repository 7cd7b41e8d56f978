package jsonscan

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// The scanner as it was before str checked strings in one pass (commit
// 8e32f35), kept as the oracle FuzzScanMatchesOracle holds Scan to: the
// same answers, ok and multiline, for every input.

func oracleScan(b []byte) (ok, multiline bool) {
	s := oracleScanner{b: b}
	return s.value() && s.i == len(b), s.multiline
}

type oracleScanner struct {
	b         []byte
	i         int
	multiline bool
}

// value scans one value, with the whitespace around it. Nesting is kept on
// an explicit stack, not in recursion, so a hostile value can't grow the
// goroutine's stack: one entry per open array or object.
func (s *oracleScanner) value() bool {
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
func (s *oracleScanner) key() bool {
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

func (s *oracleScanner) space() {
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

func (s *oracleScanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// str scans a string from its opening quote. The quote that may end it,
// and any backslash before that, are found by bytes.IndexByte, which uses
// vector instructions; the run between is then checked eight bytes at a
// time for control characters and multi-byte UTF-8, both rare in practice.
func (s *oracleScanner) str() bool {
	b, i := s.b, s.i+1
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return false
		}
		end := i + q
		if e := bytes.IndexByte(b[i:end], '\\'); e >= 0 {
			end = i + e
		}
		if !oraclePrintable(b[i:end]) {
			return false
		}
		i = end
		if b[i] == '"' {
			s.i = i + 1
			return true
		}
		// A backslash: one escape.
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
	}
}

// printable reports whether b holds no control character and is valid
// UTF-8. b ends before a quote or a backslash, so a multi-byte sequence
// cut at its end is invalid there too.
func oraclePrintable(b []byte) bool {
	i := 0
	for i < len(b) {
		// Eight bytes at a time: a word is ASCII from 0x20 on when no byte
		// has its top bit set, nor sets it as 0x20 is taken from it. A
		// borrow from one byte into the next only follows a byte that
		// failed already, so the test is exact.
		for i+16 <= len(b) {
			x, y := binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
			if ((x-0x2020202020202020)|x|(y-0x2020202020202020)|y)&0x8080808080808080 != 0 {
				break
			}
			i += 16
		}
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if ((x-0x2020202020202020)|x)&0x8080808080808080 != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			return true
		}
		switch c := b[i]; {
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
		default:
			i++
		}
	}
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *oracleScanner) number() bool {
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
