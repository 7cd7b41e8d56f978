package restore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spillway/spillway/internal/config"
)

// RefusedError is a config whose files can't give the records back whole:
// Key is the config key, Why what its files lack, Fix what to set for the
// files written from now on.
type RefusedError struct {
	Key string
	Why string
	Fix string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("restore refuses this config: %s: %s; %s", e.Key, e.Why, e.Fix)
}

// allFields are the fields a record needs to be restored whole: its
// offset places it (progress, the ledger's ranges), the rest is the record.
var allFields = []string{"key", "value", "offset", "timestamp", "headers"}

// Check refuses, before anything is read, a config whose data files can't
// give each record back byte for byte: a format that keeps a subset of the
// record or can't tell null from empty, text where bytes may be binary, or
// values typed by a schema registry, which would have to be re-encoded.
func Check(cfg *config.Config) error {
	f := cfg.Format
	var missing []string
	for _, name := range allFields {
		if !slices.Contains(f.Fields, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return &RefusedError{Key: "format.fields", Why: fmt.Sprintf("the files hold %s, not %s", strings.Join(f.Fields, ", "), strings.Join(missing, ", ")),
			Fix: "restore needs fields [key, value, offset, timestamp, headers]"}
	}
	if !f.Envelope {
		return &RefusedError{Key: "format.envelope", Why: "false writes one bare field per record, so key, headers, offset and timestamp are not in the files", Fix: "restore needs envelope: true"}
	}
	if cfg.SchemaRegistry.URL != "" {
		return &RefusedError{Key: "schema_registry.url", Why: fmt.Sprintf("the files hold %s decoded by their registered schemas, and re-encoding them with the schema id gives the original bytes only when the producer's encoder and Spillway's agree byte for byte, which nothing in the files proves", orDefault(cfg.SchemaRegistry.Decode, "values")),
			Fix: "restore reads files written without a schema registry (value_encoding: base64 keeps the wire format's bytes)"}
	}
	switch f.Type {
	case "jsonl", "json":
		if f.ValueEncoding != "base64" {
			return &RefusedError{Key: "format.value_encoding", Why: fmt.Sprintf("%q writes values as text or as embedded JSON, so a value that is a JSON string can't be told from text, pretty-printed JSON was put on one line, and binary values were not written", orDefault(f.ValueEncoding, "none")),
				Fix: "restore needs value_encoding: base64 with " + f.Type}
		}
	case "avro", "parquet":
		// Keys, values and header values are bytes (base64) or UTF-8
		// strings (none), each nullable: both give the bytes back, and a
		// record that was not UTF-8 under none was never written (the
		// error policy had it).
	case "csv":
		return &RefusedError{Key: "format.type", Why: "csv writes a null header value as an empty one, and its rows can't tell every null from an empty field", Fix: "restore reads jsonl or json (with value_encoding: base64), avro or parquet"}
	case "bytes":
		return &RefusedError{Key: "format.type", Why: "bytes keeps values only, and a value may hold the separator", Fix: "restore reads jsonl or json (with value_encoding: base64), avro or parquet"}
	default:
		return &RefusedError{Key: "format.type", Why: fmt.Sprintf("%q can't be read back", f.Type), Fix: "restore reads jsonl or json (with value_encoding: base64), avro or parquet"}
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
