package format

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/spillway/spillway/internal/bench/benchdata"
)

// BenchmarkZstdSettings compares NewCompressor's zstd settings with the
// alternatives klauspost's encoder offers, on jsonl lines shaped as
// Spillway writes them (userbench's 1 KiB values in the envelope). Its
// figures are the CPU time of the compressing thread per MiB (cpu-ns/MiB:
// steadier than ns/op on a shared machine; every setting compresses on
// the calling goroutine) and the compressed size over the input (ratio).
// docs/bench.md has a run.
func BenchmarkZstdSettings(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var data []byte
	for i := 0; len(data) < 4<<20; i++ {
		data = fmt.Appendf(data, `{"key":null,"value":%s,"offset":%d,"timestamp":%d,"headers":[]}`+"\n",
			benchdata.Value(r, i, 1024), 100000+i, 1733150000123+int64(i))
	}
	ours := []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zstdWindow)}
	with := func(o ...zstd.EOption) []zstd.EOption { return append(append([]zstd.EOption{}, ours...), o...) }
	for _, s := range []struct {
		name string
		opts []zstd.EOption
	}{
		{"ours", ours},
		// What naive-zstd runs (its defaults but the level), on one
		// goroutine so that the thread's CPU time is all of it.
		{"defaults", []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1)}},
		{"no-checksum", with(zstd.WithEncoderCRC(false))},
		{"low-memory", with(zstd.WithLowerEncoderMem(true))},
		{"no-literal-entropy", with(zstd.WithAllLitEntropyCompression(false))},
		{"window-128KiB", with(zstd.WithWindowSize(128 << 10))},
		{"window-1MiB", with(zstd.WithWindowSize(1 << 20))},
	} {
		b.Run(s.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.SetBytes(int64(len(data)))
			zw, err := zstd.NewWriter(nil, s.opts...)
			if err != nil {
				b.Fatal(err)
			}
			var out counter
			start := threadCPU(b)
			for b.Loop() {
				out = 0
				zw.Reset(&out)
				for rest := data; len(rest) > 0; {
					k := min(len(rest), 1100) // about a line per write, as the encoder sends them
					if _, err := zw.Write(rest[:k]); err != nil {
						b.Fatal(err)
					}
					rest = rest[k:]
				}
				if err := zw.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N)/float64(len(data))*(1<<20), "cpu-ns/MiB")
			b.ReportMetric(float64(out)/float64(len(data)), "ratio")
		})
	}
}

type counter int

func (c *counter) Write(p []byte) (int, error) { *c += counter(len(p)); return len(p), nil }

func threadCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
