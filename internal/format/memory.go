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

// WriterMemory estimates the bytes one open file's encoder and compressor
// hold for cfg, for the memory budget: the stream compressor for the text
// formats (CompressorMemory), the open block and its codec for avro, the
// open row group for parquet. It is what the sink charges per open file,
// besides the storage writer's part buffers.
//
// The avro and parquet figures are measured by TestWriterMemory (100
// writers, each filled to just below its flush threshold, heap retained
// after GC; linux/amd64), rounded up; update them when that test says so.
func WriterMemory(cfg config.Format) int64 {
	switch cfg.Type {
	case "avro":
		return avroMemory(cfg.Compression)
	case "parquet":
		return parquetMemory
	}
	return CompressorMemory(cfg.Compression)
}

// avroMemory is an open avro file: its block buffer (a block and a
// quarter), the compressed block (at most avroKeptBuffer is kept), the
// codec's state, and the schema and record state (some 25 KiB). Measured (linux/amd64, Go 1.26, twmb/avro
// v1.9.1, klauspost/compress v1.20.4; go test -run TestWriterMemory -v
// ./internal/format/):
//
//	none      350,742 B
//	gzip    1,506,240 B  (flate's tables and window)
//	zstd    2,735,694 B  (default level, 512 KiB window, low-memory mode)
//	snappy    620,857 B  (the compressed block is up to 7/6 of the block)
func avroMemory(compression string) int64 {
	const state = 64 << 10
	const block = avroBlockBytes + avroBlockBytes/4
	switch compression {
	case "gzip":
		return state + block + avroKeptBuffer + 1<<20
	case "zstd":
		return state + block + avroKeptBuffer + 9<<18 // 2.25 MiB
	case "snappy":
		return state + block + avroKeptBuffer
	}
	return state + block
}

// parquetMemory is an open parquet file: a row group up to its threshold,
// plus page buffers, the page index and the schema. Measured as avro's
// (parquet-go v0.32.1): none 4,723,556 B, gzip 4,429,441 B, zstd
// 4,424,496 B, snappy 5,222,188 B. The codecs' compressors sit in
// parquet-go's pools, shared by every open file.
const parquetMemory = parquetRowGroupBytes + 2<<20
