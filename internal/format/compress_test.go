package format

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

	"github.com/spillway/spillway/internal/format/formattest"
)

// sample returns n bytes of JSON Lines, compressible like real output.
func sample(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"key":"user-%d","value":{"n":%d,"s":"item %d"},"offset":%d}`+"\n", i%977, i*31, i, i)
	}
	return b.Bytes()[:n]
}

// sink is the storage writer below a compressor. It must not be closed by
// the compressor.
type sink struct {
	bytes.Buffer
	closed bool
}

func (s *sink) Close() error { s.closed = true; return nil }

func compress(t testing.TB, kind string, data []byte) []byte {
	t.Helper()
	var s sink
	zw, err := NewCompressor(kind, &s)
	if err != nil {
		t.Fatalf("NewCompressor(%s): %v", kind, err)
	}
	// Several writes, as an encoder makes one per record.
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1000)
		if _, err := zw.Write(rest[:n]); err != nil {
			t.Fatalf("%s: Write: %v", kind, err)
		}
		rest = rest[n:]
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("%s: Close: %v", kind, err)
	}
	if s.closed {
		t.Fatalf("%s: Close closed the underlying writer", kind)
	}
	return s.Bytes()
}

func decompress(t *testing.T, kind string, data []byte) []byte {
	t.Helper()
	var r io.Reader
	switch kind {
	case "none":
		return data
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("gzip.NewReader: %v", err)
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatalf("zstd.NewReader: %v", err)
		}
		defer zr.Close()
		r = zr
	case "snappy":
		r = snappy.NewReader(bytes.NewReader(data))
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: decompress: %v", kind, err)
	}
	return out
}

func TestCompressorRoundTrip(t *testing.T) {
	for _, kind := range formattest.Compressions() {
		for _, n := range []int{0, 1, 100 << 10, 3 << 20} {
			data := sample(n)
			z := compress(t, kind, data)
			if got := decompress(t, kind, z); !bytes.Equal(got, data) {
				t.Errorf("%s, %d bytes: round trip returned %d different bytes", kind, n, len(got))
			}
			if kind != "none" && n > 1<<20 && len(z) > n/3 {
				t.Errorf("%s: %d bytes compressed only to %d", kind, n, len(z))
			}
		}
	}
}

// TestCompressorSystemTools checks the files are readable by the tools
// users have, not only by the library that wrote them.
func TestCompressorSystemTools(t *testing.T) {
	for _, kind := range []string{"gzip", "zstd"} {
		t.Run(kind, func(t *testing.T) {
			path, err := exec.LookPath(kind)
			if err != nil {
				t.Skipf("%s is not installed (apt-get install %s); skipping the system tool check", kind, kind)
			}
			for _, n := range []int{0, 2 << 20} {
				data := sample(n)
				cmd := exec.Command(path, "-dc")
				cmd.Stdin = bytes.NewReader(compress(t, kind, data))
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s -dc on %d bytes: %v: %s", kind, n, err, stderr.String())
				}
				if !bytes.Equal(out, data) {
					t.Errorf("%s -dc on %d bytes returned %d different bytes", kind, n, len(out))
				}
			}
		})
	}
}

func TestCompressorWriteError(t *testing.T) {
	boom := errors.New("bucket on fire")
	for _, kind := range formattest.Compressions() {
		zw, err := NewCompressor(kind, &failWriter{err: boom})
		if err != nil {
			t.Fatal(err)
		}
		_, werr := zw.Write(sample(1 << 20))
		cerr := zw.Close()
		if !errors.Is(werr, boom) && !errors.Is(cerr, boom) {
			t.Errorf("%s: Write = %v, Close = %v; want the writer's error from one of them", kind, werr, cerr)
		}
	}
}

func TestNewCompressorUnknown(t *testing.T) {
	if _, err := NewCompressor("lz4", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `format.compression "lz4" is unknown`) {
		t.Errorf("NewCompressor(lz4) = %v", err)
	}
}

// TestCompressorMemory measures what an open compressor holds and checks
// CompressorMemory is an honest upper estimate of it (and not a stale,
// wildly high one). It also checks an open compressor runs no goroutine.
func TestCompressorMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: skipped with -short and -race (run: go test -run TestCompressorMemory -v)")
	}
	data := sample(1 << 20)
	for _, kind := range formattest.Compressions()[1:] {
		measured, goroutines := measureCompressors(t, kind, 100, data)
		est := CompressorMemory(kind)
		t.Logf("%-6s measured %8d B per open compressor, CompressorMemory %8d B", kind, measured, est)
		if goroutines != 0 {
			t.Errorf("%s: %d goroutines per 100 open compressors, want 0", kind, goroutines)
		}
		if measured > est {
			t.Errorf("%s: measured %d B > CompressorMemory %d B: raise the estimate", kind, measured, est)
		}
		if measured < est/3 {
			t.Errorf("%s: measured %d B < a third of CompressorMemory %d B: lower the estimate", kind, measured, est)
		}
	}
}

// measureCompressors opens n compressors, writes data through each into a
// discarding writer, and reports the heap they retain per compressor and
// the goroutines they added.
func measureCompressors(t testing.TB, kind string, n int, data []byte) (perCompressor int64, goroutines int) {
	t.Helper()
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC() // a second time, to empty sync.Pool victim caches
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	g0 := runtime.NumGoroutine()
	before := heap()
	zws := make([]io.WriteCloser, n)
	for i := range zws {
		zw, err := NewCompressor(kind, formattest.Discard{})
		if err != nil {
			t.Fatal(err)
		}
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 4096)
			if _, err := zw.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		zws[i] = zw
	}
	after := heap()
	goroutines = runtime.NumGoroutine() - g0
	for _, zw := range zws {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.KeepAlive(zws)
	return (after - before) / int64(n), goroutines
}

func BenchmarkCompressor(b *testing.B) {
	data := sample(1 << 20)
	for _, kind := range formattest.Compressions() {
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				zw, err := NewCompressor(kind, formattest.Discard{})
				if err != nil {
					b.Fatal(err)
				}
				for rest := data; len(rest) > 0; {
					k := min(len(rest), 4096)
					if _, err := zw.Write(rest[:k]); err != nil {
						b.Fatal(err)
					}
					rest = rest[k:]
				}
				if err := zw.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
