package config

import (
	"fmt"
	"strings"
)

// DefaultBytesSeparator is format.bytes_separator's default: a line feed,
// as Confluent's format.bytearray.separator (System.lineSeparator()) on
// Linux. It is kept in its escaped form so that `config check` prints it
// readably.
const DefaultBytesSeparator = `\n`

// Separator returns format.bytes_separator as the bytes written after each
// value. The value is read with backslash escapes, so that it can be typed
// in any YAML quoting and in an environment variable: \n, \r, \t, \0, \\
// and \xHH (one byte, two hex digits). Every other character stands for
// itself, including a real line break from a YAML double-quoted "\n". ""
// means no separator at all. Validation and the bytes encoder both read it
// here, so they agree on what it accepts.
func (f *Format) Separator() ([]byte, error) {
	s := f.BytesSeparator
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 == len(s) {
			return nil, fmt.Errorf(`ends in a lone backslash; write \\ for a backslash`)
		}
		i++
		switch s[i] {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case '0':
			out = append(out, 0)
		case '\\':
			out = append(out, '\\')
		case 'x':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return nil, fmt.Errorf(`has \x without two hex digits; write a byte as \x0a`)
			}
			out = append(out, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			return nil, fmt.Errorf(`has an unknown escape \%c; use \n, \r, \t, \0, \\ or \xHH`, s[i])
		}
	}
	return out, nil
}

func isHex(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
