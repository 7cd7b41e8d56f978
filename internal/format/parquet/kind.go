package parquet

import (
	"io"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
)

// Kind is the parquet format: Parquet files, row groups cut by bytes and
// pages compressed inside the file by format.compression.
func Kind() format.Kind {
	return format.Kind{
		Name:             "parquet",
		Ext:              "parquet",
		CompressesInside: true,
		Envelope:         true,
		New:              newEncoder,
		NewTyped:         newTypedParquetEncoder,
		Buffering: format.Buffering{
			DefaultFlush:      parquetRowGroupBytes,
			MinFlush:          parquetMinFlush,
			MaxFlush:          parquetMaxFlush,
			Fixed:             func(string) int64 { return parquetFixed },
			MaxBuffered:       maxBuffered,
			LargeRecordCopies: func(string) int64 { return parquetLargeRecordCopies },
		},
	}
}

func newEncoder(cfg config.Format, w io.Writer, m format.Memory) (format.Encoder, error) {
	return newParquetEncoder(cfg, w, m)
}

// Thresholds of a row group: it is cut at half of an open file's share of
// the budget (format.Kind.FlushBytes), within these bounds. Row groups
// smaller than 1 MiB cost readers more in metadata than they save, and
// above 64 MiB gain nothing.
const (
	parquetMinFlush = 1 << 20
	parquetMaxFlush = 64 << 20
)

// maxBuffered (see format.Kind.MaxBuffered): a row group just under the
// threshold, the record that crosses it, and a page.
func maxBuffered(flush int64) int64 { return flush + flush/8 + parquetPageBytes }

// parquetFixed is what an open parquet file holds besides its row group
// (counted by Memory.Grow, as parquet-go estimates it): the schema, the
// column writers and their page indexes, the write buffer, the slack of
// the value buffers (pooled slices of a power of two, up to twice what
// they hold) and the growth not yet reported (parquetReportStep). The
// codecs' compressors sit in parquet-go's pools, shared by every open
// file. Measured as the avro package's avroFixed (parquet-go v0.32.1),
// retained less what Grow reported: none 295,379 B, gzip 672,042 B, zstd
// 680,268 B, snappy 523,802 B (before blobs skipped their page statistics,
// 0.6 MiB more).
const parquetFixed = 5 << 18 // 1.25 MiB

// parquetLargeRecordCopies: see format.Kind.LargeRecordCopies. Fewer than
// parquetBigRecord, which counts every allocation, garbage included.
const parquetLargeRecordCopies = 4
