package formats

import (
	"testing"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
)

// BenchmarkEncodeZstd encodes the same 1 KiB JSON records in jsonl, avro
// and parquet, each with zstd (jsonl through the stream compressor, avro
// and parquet inside the file), to a discarding writer: the encoders'
// cost alone, without Kafka or storage, for profiling what
// BenchmarkDrain (internal/runner) measures end to end:
//
//	go test -run XXX -bench BenchmarkEncodeZstd -cpuprofile cpu.out ./internal/format/
func BenchmarkEncodeZstd(b *testing.B) {
	recs := formattest.Varied(20_000, 1024)
	var size int64
	for _, r := range recs {
		size += int64(len(r.Value))
	}
	for _, typ := range []string{"jsonl", "avro", "parquet"} {
		b.Run(typ, func(b *testing.B) {
			cfg := formattest.ColumnarConfig(typ, "zstd", "none")
			b.SetBytes(size)
			b.ReportAllocs()
			for range b.N {
				w, err := format.NewCompressor(Of(cfg.Type).StreamCompression(cfg), formattest.Discard{})
				if err != nil {
					b.Fatal(err)
				}
				enc, err := NewBufferedEncoder(cfg, w, format.Memory{FlushBytes: Of(cfg.Type).FlushBytes(4 << 20)})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
					if err := enc.Encode(r); err != nil {
						b.Fatal(err)
					}
				}
				if err := enc.Close(); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
