package format

import (
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// NewCompressor returns a writer that compresses into w with kind: none,
// gzip, zstd or snappy ("" means none). Close flushes the compressed
// trailer but does not close w. After Close, Reset(w io.Writer), which
// every compressor it returns has, starts a new stream on w with the same
// state, without building it again.
//
// Each open compressor holds CompressorMemory(kind) bytes; the settings
// below are chosen to keep that small, because a sink may hold hundreds of
// files open at once, and fast, because a file's compressor runs on one
// core (the sink runs files in parallel instead; docs/design.md, "The
// write pipeline"):
//   - gzip: the fastest level, about twice the speed of the default for
//     some 15% more bytes on JSON Lines.
//   - zstd: the fastest level (some 1.2 times the default's speed, for
//     some 10% more bytes), one goroutine (the default concurrency runs
//     GOMAXPROCS encoders, each with its own buffers, and makes one
//     stream no faster) and a 256 KiB window. Not the low-memory mode:
//     it keeps a history of the window plus one block, so it slides the
//     whole window down at every 128 KiB block. On JSON Lines of 1 KiB
//     records the window and the mode together took zstd from 205 to 264
//     MB/s per core for the same size (1 MiB and 256 KiB windows give
//     files within 0.3% of each other on such records), and hold less
//     memory than a 1 MiB window in low-memory mode.
//   - snappy: the framed snappy stream format (.snappy files readable by
//     any snappy framing decoder). This is what snappy.NewBufferedWriter
//     writes, but that constructor runs GOMAXPROCS block compressors and a
//     writer goroutine per stream; we ask s2 for the same stream with one
//     synchronous compressor.
func NewCompressor(kind string, w io.Writer) (io.WriteCloser, error) {
	switch kind {
	case "", "none":
		return &nopCloser{w}, nil
	case "gzip":
		zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			return nil, fmt.Errorf("format: gzip: %w", err)
		}
		return zw, nil
	case "zstd":
		zw, err := zstd.NewWriter(w,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(zstdWindow),
			// An empty stream still makes a valid .zst file that zstd -d accepts.
			zstd.WithZeroFrames(true),
		)
		if err != nil {
			return nil, fmt.Errorf("format: zstd: %w", err)
		}
		return zw, nil
	case "snappy":
		return s2.NewWriter(w,
			s2.WriterSnappyCompat(),
			s2.WriterBetterCompression(), // as snappy.NewBufferedWriter
			s2.WriterConcurrency(1),
		), nil
	}
	return nil, fmt.Errorf("format.compression %q is unknown; valid: none, gzip, zstd, snappy", kind)
}

const zstdWindow = 256 << 10

// nopCloser passes writes through; closing it leaves w open, as every
// compressor's Close does.
type nopCloser struct{ io.Writer }

func (*nopCloser) Close() error { return nil }

// Reset passes writes to w from now on, as the compressors' Reset does.
func (c *nopCloser) Reset(w io.Writer) { c.Writer = w }

// CompressorMemory estimates the bytes one open compressor of kind holds
// (heap retained between writes, after it has seen at least one full block
// of data), for the memory budget. Unknown kinds report 0.
//
// The figures are measured by TestCompressorMemory (100 compressors, 1 MiB
// of JSON Lines through each, heap delta after GC; klauspost/compress
// v1.20.4, linux/amd64) and rounded up with some headroom. Update them
// when that test says so.
func CompressorMemory(kind string) int64 {
	switch kind {
	case "", "none":
		return 0
	case "gzip":
		return gzipMemory
	case "zstd":
		return zstdMemory
	case "snappy":
		return snappyMemory
	}
	return 0
}

// Bytes per open compressor, see CompressorMemory. Measured on
// linux/amd64, Go 1.26, klauspost/compress v1.20.4 (go test -run
// TestCompressorMemory -v ./internal/format/):
//
//	gzip      828,209 B  (deflate state and window at the fastest level;
//	                      1,090,492 B at the default level)
//	zstd    1,759,982 B  (the fastest level, 256 KiB window, not in
//	                      low-memory mode; 2,923,887 B at the default level)
//	snappy     65,873 B  (the 64 KiB input block); the ~76 KiB output block
//	                      sits in the writer's sync.Pool between writes and
//	                      only a GC frees it, so it is counted too.
const (
	gzipMemory   = 1152 << 10 // 1.125 MiB
	zstdMemory   = 2 << 20
	snappyMemory = 160 << 10
)
