package formats

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format/formattest"
)

// Reset starts a new, independent file with the state of the last: the
// jsonl and avro encoders (what a sink keeps from file to file). Each file
// reads back whole on its own. The compressors' half is in package format.
func TestResetStartsAnIndependentFile(t *testing.T) {
	recs := formattest.Varied(300, 1024)
	for _, c := range []struct {
		name string
		cfg  config.Format
	}{{"jsonl", formattest.JSONLConfig("none")}, {"avro+zstd", formattest.ColumnarConfig("avro", "zstd", "none")}, {"avro+gzip", formattest.ColumnarConfig("avro", "gzip", "none")}} {
		t.Run(c.name, func(t *testing.T) {
			fc := c.cfg
			var first bytes.Buffer
			enc, err := NewEncoder(fc, &first)
			if err != nil {
				t.Fatal(err)
			}
			r := enc.(interface{ Reset(io.Writer) error })
			var out bytes.Buffer
			if err := r.Reset(&out); err == nil {
				t.Fatal("Reset before Close succeeded")
			}
			files := []*bytes.Buffer{&first, {}, {}}
			for i, buf := range files {
				if i > 0 {
					if err := r.Reset(buf); err != nil {
						t.Fatal(err)
					}
				}
				for _, rec := range recs[i*100 : i*100+100] {
					if err := enc.Encode(rec); err != nil {
						t.Fatal(err)
					}
				}
				if err := enc.Close(); err != nil {
					t.Fatal(err)
				}
			}
			for i, buf := range files {
				var offsets []string
				if fc.Type == "avro" {
					for _, row := range formattest.ReadAvroGo(t, buf.Bytes()) {
						offsets = append(offsets, fmt.Sprint(row["offset"]))
					}
				} else {
					for _, l := range formattest.DecodeLines(t, buf.String()) {
						offsets = append(offsets, fmt.Sprint(*l.Offset))
					}
				}
				if len(offsets) != 100 || offsets[0] != fmt.Sprint(i*100) || offsets[99] != fmt.Sprint(i*100+99) {
					t.Fatalf("file %d holds offsets %v, want %d to %d", i, offsets, i*100, i*100+99)
				}
			}
		})
	}
}
