package format

import "github.com/spillway/spillway/internal/config"

// Extension returns the file name extension for cfg: the format's, then the
// compression's (".jsonl.gz", ".json.zst", ".jsonl.snappy").
//
// Avro and Parquet compress blocks inside the container, so their files
// get no compression suffix: the file itself is not a gzip or zstd stream
// and a ".gz" would mislead tools that go by the name.
func Extension(cfg config.Format) string {
	var ext string
	switch cfg.Type {
	case "avro", "parquet":
		return "." + cfg.Type
	case "":
		return ""
	case "bytes":
		ext = ".bin" // Confluent's format.bytearray.extension default
	default:
		ext = "." + cfg.Type // jsonl, json, csv
	}
	switch cfg.Compression {
	case "gzip":
		ext += ".gz"
	case "zstd":
		ext += ".zst"
	case "snappy":
		ext += ".snappy"
	}
	return ext
}
