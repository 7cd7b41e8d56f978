package parquet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
)

// grown follows what an encoder tells Memory.Grow.
type grown struct {
	held, peak, first int64
	calls             int
	negative          bool
}

func (g *grown) memory(flush int64) format.Memory {
	return format.Memory{FlushBytes: flush, Grow: func(d int64) {
		if g.calls == 0 {
			g.first = d
		}
		g.held += d
		g.peak = max(g.peak, g.held)
		g.calls++
		g.negative = g.negative || g.held < 0
	}}
}

// TestBufferedCountedAsTheyGrow writes some 6 MiB of 1 KiB records with a
// threshold smaller than the default: blocks and row groups are cut at
// that threshold (not at a record count, nor the default), what they hold
// is told to Grow as it grows, in many steps, never more than MaxBuffered,
// and all of it is given back by Close.
func TestBufferedCountedAsTheyGrow(t *testing.T) {
	recs := formattest.Varied(6000, 1024)
	for _, tc := range []struct {
		typ   string
		flush int64
	}{{"parquet", 1 << 20}} {
		for _, comp := range []string{"none", "zstd", "snappy", "gzip"} {
			t.Run(tc.typ+"-"+comp, func(t *testing.T) {
				cfg := formattest.ColumnarConfig(tc.typ, comp, "none")
				var g grown
				var buf bytes.Buffer
				enc, err := Kind().NewBufferedEncoder(cfg, &buf, g.memory(tc.flush))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					if err := enc.Encode(r); err != nil {
						t.Fatal(err)
					}
				}
				if g.held == 0 {
					t.Errorf("Grow adds up to 0 with records buffered")
				}
				if err := enc.Close(); err != nil {
					t.Fatal(err)
				}
				if g.held != 0 || g.negative {
					t.Errorf("Grow adds up to %d after Close (negative on the way: %v), want 0", g.held, g.negative)
				}
				if max := Kind().MaxBuffered(tc.flush); g.peak > max || g.peak < tc.flush/2 {
					t.Errorf("Grow peaked at %d B, want between half the threshold (%d B) and MaxBuffered (%d B)", g.peak, tc.flush/2, max)
				}
				var cuts int
				switch tc.typ {
				case "parquet":
					f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
					if err != nil {
						t.Fatal(err)
					}
					var rows int64
					for i, rg := range f.Metadata().RowGroups {
						rows += rg.NumRows
						var size int64
						for _, c := range rg.Columns {
							size += c.MetaData.TotalCompressedSize
						}
						if size > tc.flush+parquetPageBytes {
							t.Errorf("row group %d: %d B compressed, want at most %d B and a page", i, size, tc.flush)
						}
					}
					cuts = len(f.Metadata().RowGroups)
					if rows != int64(len(recs)) {
						t.Errorf("%d rows, want %d", rows, len(recs))
					}
				}
				// Grow is told in steps: it counts as the block or row
				// group grows. A row group's pages are given back when it
				// is written out; an avro block buffer is kept for the
				// next block, and grows only at first.
				if want := 4 * cuts; tc.typ == "avro" {
					if g.first >= tc.flush/2 {
						t.Errorf("Grow was first told %d B: the block buffer does not start small", g.first)
					}
				} else if g.calls < want {
					t.Errorf("Grow was called %d times for %d row groups: not as they grow", g.calls, cuts)
				}
				// The smaller the compressed output, the more records a row
				// group takes; uncompressed, 6 MiB must take several.
				if comp == "none" && int64(cuts) < int64(len(recs))*1024/tc.flush-1 {
					t.Errorf("%d blocks or row groups for %d KiB at a %d B threshold", cuts, len(recs), tc.flush)
				}
			})
		}
	}
}

// TestBigRecordCost writes a 16 MiB record between small ones: it is a
// block or row group of its own, it is counted while it is buffered, and
// what encoding it allocates, besides the record, is at most what the
// README's memory model says: avro once for null and twice with a codec
// (the encoded block and the compressed one), parquet parquetBigRecord
// times.
func TestBigRecordCost(t *testing.T) {
	if raceEnabled {
		t.Skip("measures allocations: skipped with -race")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = 'a' + byte(rng.IntN(26))
	}
	small := formattest.Varied(50, 1000)
	for _, typ := range []string{"parquet"} {
		for _, comp := range formattest.Compressions() {
			cfg := formattest.ColumnarConfig(typ, comp, "none")
			var g grown
			var buf bytes.Buffer
			buf.Grow(2 * len(big)) // so that the output's growth is not counted
			enc, err := Kind().NewBufferedEncoder(cfg, &buf, g.memory(0))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range small {
				if err := enc.Encode(r); err != nil {
					t.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if err := enc.Encode(&kgo.Record{Offset: 50, Timestamp: formattest.TS, Value: big}); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			held := g.held
			for _, r := range small {
				if err := enc.Encode(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			copies := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(big))
			t.Logf("%-7s %-6s: Encode allocated %.2f× the record; counted at most %.2f×; %d B of file", typ, comp, copies, float64(g.peak)/float64(len(big)), buf.Len())
			want := 1.1
			switch {
			case typ == "parquet":
				want = parquetBigRecord
			case comp != "none":
				want = 2.3
			}
			if copies > want {
				t.Errorf("%s/%s: Encode allocated %.2f× the record, want at most %.1f×", typ, comp, copies, want)
			}
			if g.peak < int64(len(big)) {
				t.Errorf("%s/%s: Grow peaked at %d B, want the record (%d B) counted", typ, comp, g.peak, len(big))
			}
			if held >= int64(len(big))/2 {
				t.Errorf("%s/%s: %d B still counted after the record's Encode: it is not written out at once", typ, comp, held)
			}
			if typ == "parquet" {
				// Its bytes are in the file once: no statistics copy it.
				if n := buf.Len(); n > len(big)+len(big)/4 && comp == "none" {
					t.Errorf("parquet/none: %d B of file for a %d B record", n, len(big))
				}
				f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
				if err != nil {
					t.Fatal(err)
				}
				var rows []int64
				for _, rg := range f.Metadata().RowGroups {
					rows = append(rows, rg.NumRows)
				}
				if fmt.Sprint(rows) != "[50 1 50]" {
					t.Errorf("parquet/%s: row groups of %v rows, want [50 1 50]: the big record in one of its own", comp, rows)
				}
			}
		}
	}
}
