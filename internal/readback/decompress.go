package readback

import (
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// Decompress undoes the compression named by exts (as naming.SplitExt gives
// them) and returns the stream of the format, with the format's extension
// ("" when exts name none). Close the returned reader; it does not close r.
func Decompress(r io.Reader, exts []string) (io.ReadCloser, string, error) {
	format := ""
	if len(exts) > 0 && !isCompression(exts[0]) {
		format = exts[0]
	}
	out := io.NopCloser(r)
	for i := len(exts) - 1; i >= 0; i-- {
		switch exts[i] {
		case "gz":
			zr, err := gzip.NewReader(out)
			if err != nil {
				return nil, "", err
			}
			out = zr
		case "zst":
			zr, err := zstd.NewReader(out, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, "", err
			}
			out = zstdCloser{zr}
		case "snappy":
			out = io.NopCloser(snappy.NewReader(out))
		default:
			if i != 0 {
				return nil, "", fmt.Errorf("extension .%s comes after a compression's", exts[i])
			}
		}
	}
	return out, format, nil
}

func isCompression(ext string) bool { return ext == "gz" || ext == "zst" || ext == "snappy" }

type zstdCloser struct{ *zstd.Decoder }

func (z zstdCloser) Close() error { z.Decoder.Close(); return nil }
