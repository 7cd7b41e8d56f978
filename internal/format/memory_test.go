package format

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
)

// varied returns n records of about size bytes of JSON, no two alike, so
// that compressors and page encoders see realistic input.
func varied(n, size int) []*kgo.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"checkout", "login", "search", "mobile", "desktop", "eu-west-1", "premium", "trial", "lorem", "ipsum", "dolor", "amet"}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Appendf(nil, `{"id":%d,"user":"u-%06d","event":"%s","amount":%d,"text":"`, i, rng.IntN(1_000_000), words[rng.IntN(len(words))], rng.IntN(100000))
		for len(v) < size-2 {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, ' ')
		}
		v = append(v, `"}`...)
		recs[i] = &kgo.Record{Offset: int64(i), Timestamp: ts, Key: fmt.Appendf(nil, "u-%d", i%977), Value: v,
			Headers: []kgo.RecordHeader{{Key: "trace-id", Value: fmt.Appendf(nil, "%032x", rng.Uint64())}}}
	}
	return recs
}

// TestWriterMemory measures what an open avro or parquet file holds at its
// fullest (just before a block or row group goes out, after one already
// has) and checks WriterMemory is an honest upper estimate of it, and not
// a stale, wildly high one. It also checks an open writer runs no
// goroutine.
func TestWriterMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: skipped with -short and -race (run: go test -run TestWriterMemory -v)")
	}
	recs := varied(30_000, 1024)
	for _, typ := range []string{"avro", "parquet"} {
		n := 20
		if typ == "parquet" {
			n = 6
		}
		for _, comp := range compressions {
			cfg := columnarConfig(typ, comp, "none")
			measured, goroutines := measureWriters(t, cfg, n, recs)
			est := WriterMemory(cfg)
			t.Logf("%-7s %-6s measured %9d B per open file, WriterMemory %9d B", typ, comp, measured, est)
			if goroutines != 0 {
				t.Errorf("%s/%s: %d goroutines per %d open files, want 0", typ, comp, goroutines, n)
			}
			if measured > est {
				t.Errorf("%s/%s: measured %d B > WriterMemory %d B: raise the estimate", typ, comp, measured, est)
			}
			if measured < est/2 {
				t.Errorf("%s/%s: measured %d B < half of WriterMemory %d B: lower the estimate", typ, comp, measured, est)
			}
		}
	}
}

// measureWriters opens n encoders of cfg on discarding writers, fills each
// to just below its next flush, and reports the heap they retain per
// encoder and the goroutines they added.
func measureWriters(t *testing.T, cfg config.Format, n int, recs []*kgo.Record) (perWriter int64, goroutines int) {
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
	encs := make([]Encoder, n)
	for i := range encs {
		enc, err := NewEncoder(cfg, discard{})
		if err != nil {
			t.Fatal(err)
		}
		encs[i] = enc
		flushed := false
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
			var held, limit int64
			switch e := enc.(type) {
			case *avroEncoder:
				held, limit = int64(len(e.block)), avroBlockBytes
				flushed = flushed || e.count == 0
			case *parquetEncoder:
				held, limit = e.w.Size()-e.base, parquetRowGroupBytes
				flushed = flushed || e.base > 0
			}
			if flushed && held > limit-3*int64(len(r.Value)) {
				break
			}
		}
		if !flushed {
			t.Fatalf("%s/%s: %d records never filled a block or row group", cfg.Type, cfg.Compression, len(recs))
		}
	}
	after := heap()
	goroutines = runtime.NumGoroutine() - g0
	for _, enc := range encs {
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.KeepAlive(encs)
	return (after - before) / int64(n), goroutines
}
