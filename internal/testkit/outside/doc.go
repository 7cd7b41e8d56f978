// Package outside runs the tools nobody here wrote, so that a test can
// check Spillway's output with an independent reader or feed it with an
// independent client: DuckDB (read_parquet, read_json), Debian's
// python3-avro, kcat, and the zstd and snappy command-line decompressors.
// A missing tool skips the test, or fails it when scripts/test.sh promised
// every tool (testkit.RequireToolsEnv).
package outside
