package format

import "github.com/spillway/spillway/internal/config"

// StreamCompression is the compression to wrap cfg's encoder output in, for
// NewCompressor: cfg.Compression for the text formats, and none for avro
// and parquet, which compress blocks and pages inside the file with the
// same setting.
func StreamCompression(cfg config.Format) string {
	switch cfg.Type {
	case "avro", "parquet":
		return "none"
	}
	return cfg.Compression
}

// WriterMemory is the most one open file's encoder and compressor hold
// for cfg with the default thresholds: FixedMemory, plus for avro and
// parquet a full block or row group (MaxBuffered). Spillway charges the
// two parts apart (see Memory); this is their sum, for sizing.
func WriterMemory(cfg config.Format) int64 {
	return FixedMemory(cfg) + MaxBuffered(cfg, DefaultFlushBytes(cfg.Type))
}

// avroFixed is what an open avro file holds besides its block buffers
// (counted by Memory.Grow): the codec's state, and the schema and record
// state (some 25 KiB). Measured by TestWriterMemory (100 writers, each
// filled to just below its flush threshold, heap retained after GC, less
// what Grow reported; linux/amd64, Go 1.26, twmb/avro v1.9.1,
// klauspost/compress v1.20.4; go test -run TestWriterMemory -v
// ./internal/format/), rounded up:
//
//	          retained    less Grow
//	none       350,568       22,888
//	gzip     1,506,288    1,113,072  (flate's tables and window)
//	zstd     2,735,360    2,358,528  (default level, 512 KiB window, low-memory mode)
//	snappy     620,905       30,674
func avroFixed(compression string) int64 {
	const state = 64 << 10
	switch compression {
	case "gzip":
		return state + 9<<17 // 1.125 MiB
	case "zstd":
		return state + 5<<19 // 2.5 MiB
	}
	return state
}

// parquetFixed is what an open parquet file holds besides its row group
// (counted by Memory.Grow, as parquet-go estimates it): the schema, the
// column writers and their page indexes, the write buffer, the slack of
// the value buffers (pooled slices of a power of two, up to twice what
// they hold) and the growth not yet reported (parquetReportStep). The
// codecs' compressors sit in parquet-go's pools, shared by every open
// file. Measured as avroFixed (parquet-go v0.32.1), retained less what
// Grow reported: none 295,379 B, gzip 672,042 B, zstd 680,268 B, snappy
// 523,802 B (before blobs skipped their page statistics, 0.6 MiB more).
const parquetFixed = 5 << 18 // 1.25 MiB

// LargeRecordCopies is how many copies of a record as large as a block or
// row group cfg's encoder holds at once while it writes it, besides the
// record itself (which the Kafka client holds): none for the text formats,
// which write a large value through in pieces; for Avro its encoded block,
// and with a codec the compressed block too; for Parquet, parquet-go's
// column buffer, the encoded page, the page with its levels prefixed (data
// pages v1) and the page buffer of the row group (compressed, as large as
// the value without a codec). Measured by TestBigRecordCost (allocations)
// and, as peak memory of the process, by the e2e test
// TestOversizedRecordsEveryFormatUnderCgroup. The budget plan turns it into
// the advice for such records (budget.Plan.LargeRecordMultiple).
func LargeRecordCopies(cfg config.Format) int64 {
	switch cfg.Type {
	case "avro":
		if cfg.Compression == "" || cfg.Compression == "none" {
			return 1
		}
		return 2
	case "parquet":
		return parquetLargeRecordCopies
	}
	return 0
}

// parquetLargeRecordCopies: see LargeRecordCopies. Fewer than
// parquetBigRecord, which counts every allocation, garbage included.
const parquetLargeRecordCopies = 4
