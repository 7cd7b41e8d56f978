package format

import (
	"bytes"
	"io"
	"testing"

	"github.com/spillway/spillway/internal/format/formattest"
)

// Reset starts a new, independent file with the state of the last: every
// compressor after Close (what a sink keeps from file to file). Each file
// reads back whole on its own. The encoders' half is in package formats.
func TestResetStartsAnIndependentFile(t *testing.T) {
	type resetter interface{ Reset(io.Writer) }
	for _, kind := range formattest.Compressions() {
		zw, err := NewCompressor(kind, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := zw.(resetter)
		if !ok {
			t.Fatalf("%s: %T has no Reset", kind, zw)
		}
		for i, n := range []int{100 << 10, 0, 3 << 20, 10} {
			var out bytes.Buffer
			r.Reset(&out)
			data := sample(n)
			if _, err := zw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			if got := decompress(t, kind, out.Bytes()); !bytes.Equal(got, data) {
				t.Errorf("%s, stream %d: round trip returned %d different bytes of %d", kind, i, len(got), n)
			}
		}
	}

}
