// Package jsonfmt writes the JSON text formats: jsonl (JSON Lines, one
// record a line) and json (one array of records), each record the envelope
// of format.fields or one bare field, with values that are already JSON
// embedded and large fields written through in pieces. JSONL and JSON are
// their entries in the table of formats (package formats); the encoders are
// only reached through them. Registry-typed records reach these encoders as
// JSON through format.Typed.
//
// It is not named json so that it does not shadow encoding/json, which its
// callers and tests use beside it.
package jsonfmt

import (
	"io"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
)

// JSONL is the kind of JSON Lines files: one JSON record a line.
func JSONL() format.Kind {
	return format.Kind{Name: "jsonl", Ext: "jsonl", Envelope: true, JSONRecords: true, New: newJSONL}
}

// JSON is the kind of JSON files: one array of JSON records.
func JSON() format.Kind {
	return format.Kind{Name: "json", Ext: "json", Envelope: true, JSONRecords: true, New: newJSON}
}

func newJSONL(cfg config.Format, w io.Writer, _ format.Memory) (format.Encoder, error) {
	rec, err := newJSONRecord(cfg)
	if err != nil {
		return nil, err
	}
	return &jsonlEncoder{out: format.NewOutput(w, "jsonl"), rec: rec}, nil
}

func newJSON(cfg config.Format, w io.Writer, _ format.Memory) (format.Encoder, error) {
	rec, err := newJSONRecord(cfg)
	if err != nil {
		return nil, err
	}
	return &jsonEncoder{out: format.NewOutput(w, "json"), rec: rec}, nil
}
