package avro

import (
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
)

// TestWriterMemory measures what an open avro or parquet file holds at its
// fullest (just before a block or row group goes out, after one already
// has) and checks it against what Spillway counts for it: FixedMemory,
// charged when the file opens, plus what the encoder told Memory.Grow.
// The count must be an honest upper estimate, and not a stale, wildly
// high one. It also checks an open writer runs no goroutine.
func TestWriterMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: skipped with -short and -race (run: go test -run TestWriterMemory -v)")
	}
	recs := formattest.Varied(30_000, 1024)
	for _, typ := range []string{"avro"} {
		n := 20
		for _, comp := range formattest.Compressions() {
			cfg := formattest.ColumnarConfig(typ, comp, "none")
			measured, reported, goroutines := measureWriters(t, cfg, n, recs)
			fixed := Kind().FixedMemory(cfg)
			t.Logf("%-7s %-6s measured %9d B per open file: FixedMemory %9d B + Grow %9d B = %9d B; measured-Grow %9d B",
				typ, comp, measured, fixed, reported, fixed+reported, measured-reported)
			if goroutines != 0 {
				t.Errorf("%s/%s: %d goroutines per %d open files, want 0", typ, comp, goroutines, n)
			}
			if est := fixed + reported; measured > est {
				t.Errorf("%s/%s: measured %d B > counted %d B: raise FixedMemory", typ, comp, measured, est)
			} else if measured < est/2 {
				t.Errorf("%s/%s: measured %d B < half of counted %d B: lower FixedMemory", typ, comp, measured, est)
			}
			if max := Kind().FixedMemory(cfg) + Kind().MaxBuffered(Kind().DefaultFlushBytes()); measured > max {
				t.Errorf("%s/%s: measured %d B > FixedMemory+MaxBuffered %d B", typ, comp, measured, max)
			}
		}
	}
}

// measureWriters opens n encoders of cfg on discarding writers, fills each
// to just below its next flush, and reports the heap they retain per
// encoder, what they told Memory.Grow per encoder, and the goroutines they
// added.
func measureWriters(t *testing.T, cfg config.Format, n int, recs []*kgo.Record) (perWriter, reported int64, goroutines int) {
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
	encs := make([]format.Encoder, n)
	var grown int64
	for i := range encs {
		enc, err := Kind().NewBufferedEncoder(cfg, formattest.Discard{}, format.Memory{Grow: func(d int64) { grown += d }})
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
				held, limit = int64(len(e.block)), e.mem.Flush
				flushed = flushed || e.count == 0
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
	reported = grown / int64(n)
	for _, enc := range encs {
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if grown != 0 {
		t.Errorf("%s/%s: Grow adds up to %d B after Close, want 0", cfg.Type, cfg.Compression, grown)
	}
	runtime.KeepAlive(encs)
	return (after - before) / int64(n), reported, goroutines
}
