package format

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Field is one record field that can be written.
type Field uint8

const (
	FieldKey Field = iota
	FieldValue
	FieldOffset
	FieldTimestamp
	FieldHeaders
	// FieldPartition is the record's Kafka partition (int32). It is not in
	// format.fields' default, so that files and schemas written before it
	// existed keep their shape; an Iceberg table's files always hold it.
	FieldPartition
)

// FieldNames are the names in format.fields and in the JSON output.
var FieldNames = [...]string{
	FieldKey:       "key",
	FieldValue:     "value",
	FieldOffset:    "offset",
	FieldTimestamp: "timestamp",
	FieldHeaders:   "headers",
	FieldPartition: "partition",
}

const validFields = "key, value, offset, timestamp, headers, partition"

func parseField(name string) (Field, bool) {
	for f, n := range FieldNames {
		if n == name {
			return Field(f), true
		}
	}
	return 0, false
}

// ParseFields reads format.fields: known names, each once, at least one,
// in their order. Every encoder that writes the fields it lists takes them
// from here, so that all of them refuse a bad list with the same words.
func ParseFields(names []string) ([]Field, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("format.fields is empty; valid fields: %s", validFields)
	}
	var out []Field
	for _, name := range names {
		f, ok := parseField(name)
		if !ok {
			return nil, fmt.Errorf("format.fields: unknown field %q; valid: %s", name, validFields)
		}
		for _, g := range out {
			if g == f {
				return nil, fmt.Errorf("format.fields: field %q is listed twice", name)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// NotUTF8 is the record error for a key, value or header value (what) that
// is not UTF-8 and can only be written as base64, for the encoders that
// write them as text (jsonl, json, csv).
func NotUTF8(what string, r *kgo.Record) error {
	return fmt.Errorf("%w: %s at offset %d is not valid UTF-8; set format.value_encoding: base64", ErrRecord, what, r.Offset)
}
