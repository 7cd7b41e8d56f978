package partvalue

import (
	"crypto/sha256"
	"encoding/hex"
)

// How AppendKey writes a record key: the rules are in the package doc,
// under Keys.
const (
	// MaxKeyLen bounds a key's rendering: at most 200 bytes, so names stay
	// within S3's 1024-byte keys and a local file name's 255 bytes.
	MaxKeyLen  = 200
	keyHashTag = "!h"
	keyHashLen = 2 * sha256.Size
	// keyCut is the most of a long key's rendering kept before its hash.
	keyCut = MaxKeyLen - len(keyHashTag) - keyHashLen
	// nullKey is the null key's rendering; quotedNull is that of the key
	// whose bytes are "null".
	nullKey    = "null"
	quotedNull = "!6Eull"
	emptyKey   = "!empty"
)

// keyPlain marks the bytes that may stand for themselves; keyByteLen adds
// the positional rules for '_' and '.'.
var keyPlain = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	return t
}()

const upperHex = "0123456789ABCDEF"

// plainAt reports whether byte c, at index i of a key of n bytes, is written
// as itself.
func plainAt(c byte, i, n int) bool {
	switch c {
	case '_':
		return i > 0
	case '.':
		return i > 0 && i < n-1
	}
	return keyPlain[c]
}

// escapedLen is the length of key's escaping, before any cut.
func escapedLen(key []byte) int {
	if len(key) == 0 {
		return 0
	}
	n := len(key)
	for _, c := range key {
		if !keyPlain[c] {
			n += 2
		}
	}
	// The positional rules, for the bytes the table lets through.
	if c := key[0]; c == '_' || c == '.' {
		n += 2
	}
	if len(key) > 1 && key[len(key)-1] == '.' {
		n += 2
	}
	return n
}

// KeyLen is the length of key's rendering, or, for a long key, a bound on
// it: room to render it in.
func KeyLen(key []byte) int {
	switch {
	case key == nil:
		return len(nullKey)
	case len(key) == 0:
		return len(emptyKey)
	case string(key) == nullKey:
		return len(quotedNull)
	}
	return min(escapedLen(key), MaxKeyLen)
}

// AppendKey appends key's rendering to b. nil is the null key and a
// non-nil empty slice the empty key, as in kgo.Record.Key.
func AppendKey(b, key []byte) []byte {
	switch {
	case key == nil:
		return append(b, nullKey...)
	case len(key) == 0:
		return append(b, emptyKey...)
	case string(key) == nullKey:
		return append(b, quotedNull...)
	}
	if n := escapedLen(key); n <= MaxKeyLen {
		if n == len(key) {
			return append(b, key...) // the common case: nothing to escape
		}
		return appendEscaped(b, key, len(key), -1)
	}
	b = appendEscaped(b, key, len(key), keyCut)
	sum := sha256.Sum256(key)
	b = append(b, keyHashTag...)
	return hex.AppendEncode(b, sum[:])
}

// appendEscaped appends the escaping of key, a key of n bytes or the first
// bytes of one, stopping before the unit that would take it past limit
// bytes (no limit when negative).
func appendEscaped(b, key []byte, n, limit int) []byte {
	start := len(b)
	for i, c := range key {
		if plainAt(c, i, n) {
			if limit >= 0 && len(b)-start+1 > limit {
				break
			}
			b = append(b, c)
			continue
		}
		if limit >= 0 && len(b)-start+3 > limit {
			break
		}
		b = append(b, '!', upperHex[c>>4], upperHex[c&0xf])
	}
	return b
}

// IsKeyChar reports whether c can appear in a key's rendering.
func IsKeyChar(c byte) bool { return keyPlain[c] || c == '!' }

// ParseKey reads a key's rendering back. cut reports a long key: key then
// holds only the bytes its readable prefix spells. ok is false for text
// that AppendKey writes for no key.
func ParseKey(s string) (key []byte, cut, ok bool) {
	switch s {
	case nullKey:
		return nil, false, true
	case emptyKey:
		return []byte{}, false, true
	}
	body := s
	if n := len(s) - keyHashLen - len(keyHashTag); n >= keyCut-2 && n <= keyCut && s[n:n+len(keyHashTag)] == keyHashTag {
		if !isLowerHex(s[n+len(keyHashTag):]) {
			return nil, false, false
		}
		body, cut = s[:n], true
	}
	key, ok = unescape(body)
	if !ok {
		return nil, false, false
	}
	// Only the form AppendKey writes is accepted, so that each name maps
	// back to one key: re-escaping must give the same text.
	var again []byte
	if cut {
		again = appendEscaped(make([]byte, 0, len(body)), key, len(key)+1, -1)
	} else {
		again = AppendKey(make([]byte, 0, len(s)), key)
	}
	if string(again) != body {
		return nil, false, false
	}
	return key, cut, true
}

// unescape decodes plain bytes and "!XX" escapes, without checking
// positional rules.
func unescape(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	key := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keyPlain[c] {
			key = append(key, c)
			continue
		}
		if c != '!' || i+2 >= len(s) {
			return nil, false
		}
		hi, lo := upperHexVal(s[i+1]), upperHexVal(s[i+2])
		if hi < 0 || lo < 0 {
			return nil, false
		}
		key = append(key, byte(hi<<4|lo))
		i += 2
	}
	return key, true
}

func upperHexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
