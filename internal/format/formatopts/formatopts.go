// Package formatopts is the format section of the config (format.type,
// compression, fields, ...): its Options and their checks. It is a leaf,
// apart from package format, so that config can embed it and format's own
// test helpers (formattest) name it without an import cycle; format calls
// the type format.Options.
package formatopts

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spillway/spillway/internal/keycheck"
)

// Options is the format section of the config: how records are encoded.
// Package config embeds it, and package format knows it as
// format.Options; Validate checks it.
type Options struct {
	Type          string   `koanf:"type"`        // csv | json | jsonl | avro | parquet | bytes
	Compression   string   `koanf:"compression"` // none | gzip | snappy | zstd
	Fields        []string `koanf:"fields"`      // key, value, offset, timestamp, headers, partition
	ValueEncoding string   `koanf:"value_encoding"`
	Envelope      bool     `koanf:"envelope"`
	// BytesSeparator follows each value in the bytes format, with
	// backslash escapes; see Separator.
	BytesSeparator string `koanf:"bytes_separator"`
	// Micros, no key of its own, is set with iceberg.table (config's
	// ApplyIcebergLayout): Parquet timestamps and times in microseconds,
	// Iceberg's unit, instead of milliseconds.
	Micros bool `koanf:"-"`
}

// DefaultBytesSeparator is format.bytes_separator's default: a line feed,
// as Confluent's format.bytearray.separator (System.lineSeparator()) on
// Linux. It is kept in its escaped form so that `config check` prints it
// readably.
const DefaultBytesSeparator = `\n`

// DefaultFields is format.fields' default: every part of a record but its
// Kafka partition, which was added later and is written only when listed,
// so that a deployment's files keep the columns they always had.
func DefaultFields() []string { return []string{"key", "value", "offset", "timestamp", "headers"} }

// The accepted values of the section's enumerated keys. Normalize matches
// them case-insensitively and stores them in the case given here.
var (
	compressions   = []string{"none", "gzip", "snappy", "zstd"}
	fieldNames     = []string{"key", "value", "offset", "timestamp", "headers", "partition"}
	valueEncodings = []string{"none", "base64"}
)

// typeNames is every format.type name, in the order messages list them.
// built says whether this binary can write it: a planned format is refused
// by validation, so that `config check` and `run` agree, and is turned on
// here, by this one flag, once the format has its encoder.
var typeNames = []struct {
	name  string
	built bool
}{
	{"jsonl", true},
	{"json", true},
	{"csv", true},
	{"bytes", true},
	{"avro", true},
	{"parquet", true},
}

// typesBuilt lists the names in typeNames that are built, or planned.
func typesBuilt(built bool) []string {
	var out []string
	for _, f := range typeNames {
		if f.built == built {
			out = append(out, f.name)
		}
	}
	return out
}

// Normalize puts the enumerated values in their canonical case; values
// that match nothing are left as given, for Validate to quote.
func (f *Options) Normalize() {
	f.Type = keycheck.Canon(f.Type, append(typesBuilt(true), typesBuilt(false)...))
	f.Compression = keycheck.Canon(f.Compression, compressions)
	for i, name := range f.Fields {
		f.Fields[i] = keycheck.Canon(name, fieldNames)
	}
	f.ValueEncoding = keycheck.Canon(f.ValueEncoding, valueEncodings)
}

// Validate reports every problem of the section as a *keycheck.Error, or
// nil. Enumerated values must be in canonical case (Normalize).
func (f *Options) Validate() error {
	var ps keycheck.List
	switch built, planned := typesBuilt(true), typesBuilt(false); {
	case slices.Contains(planned, f.Type):
		ps.Add("format.type", f.Type, "is planned but not built in this version; use %s", keycheck.OrList(built))
	case f.Type == "":
		ps.Add("format.type", "", "is empty; use %s", keycheck.OrList(built))
	case !slices.Contains(built, f.Type) && len(planned) == 0:
		ps.Add("format.type", f.Type, "is not valid; use %s", keycheck.OrList(built))
	case !slices.Contains(built, f.Type):
		ps.Add("format.type", f.Type, "is not valid; use %s (%s are planned)", keycheck.OrList(built), keycheck.AndList(planned))
	}
	ps.OneOf("format.compression", f.Compression, compressions)
	if len(f.Fields) == 0 {
		ps.Add("format.fields", "", "required; list the record parts to write, such as [key, value, offset, timestamp, headers]")
	}
	for i, name := range f.Fields {
		switch {
		case !slices.Contains(fieldNames, name):
			ps.Add("format.fields", name, "is not a field; use %s", keycheck.OrList(fieldNames))
		case slices.Index(f.Fields, name) < i:
			ps.Add("format.fields", name, "is listed twice")
		}
	}
	ps.OneOf("format.value_encoding", f.ValueEncoding, valueEncodings)
	// A csv row and a bytes record have no envelope to leave out, so
	// format.envelope means nothing to them.
	envelope := f.Type != "csv" && f.Type != "bytes"
	if envelope && !f.Envelope && len(f.Fields) != 1 {
		ps.Add("format.fields", "", "must list exactly one field when format.envelope is false (that field is written bare), such as [value]; it lists %d", len(f.Fields))
	}
	if f.Type == "bytes" {
		// The bytes format is the value alone, so a list that names other
		// fields asks for something it can't write; the default list (left
		// unset) and [value] are what it does.
		if len(f.Fields) > 0 && !slices.Equal(f.Fields, DefaultFields()) && !slices.Equal(f.Fields, []string{"value"}) {
			ps.Add("format.fields", strings.Join(f.Fields, ", "), "can't be written by format.type bytes, which writes the value alone; set format.fields to [value] (or leave it unset), or use format.type csv or jsonl for other fields")
		}
	}
	if sep, err := f.Separator(); err != nil {
		ps.Add("format.bytes_separator", f.BytesSeparator, "%v", err)
	} else if f.Type != "bytes" && string(sep) != "\n" {
		ps.Add("format.bytes_separator", f.BytesSeparator, "is used only by format.type bytes; remove it, or set format.type: bytes")
	}
	return ps.Err()
}

// Separator returns format.bytes_separator as the bytes written after each
// value. The value is read with backslash escapes, so that it can be typed
// in any YAML quoting and in an environment variable: \n, \r, \t, \0, \\
// and \xHH (one byte, two hex digits). Every other character stands for
// itself, including a real line break from a YAML double-quoted "\n". ""
// means no separator at all. Validation and the bytes encoder both read it
// here, so they agree on what it accepts.
func (f *Options) Separator() ([]byte, error) {
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
