package readback

import (
	"bytes"
	"io"
	"testing"

	"github.com/spillway/spillway/internal/format"
)

// TestDecompress reads back what format's compressors write, whatever the
// extensions say.
func TestDecompress(t *testing.T) {
	want := []byte("{\"offset\":1}\n{\"offset\":2}\n")
	for _, tc := range []struct {
		comp   string
		exts   []string
		format string
	}{
		{"none", []string{"jsonl"}, "jsonl"},
		{"gzip", []string{"jsonl", "gz"}, "jsonl"},
		{"zstd", []string{"json", "zst"}, "json"},
		{"snappy", []string{"jsonl", "snappy"}, "jsonl"},
		{"zstd", []string{"zst"}, ""},
	} {
		var buf bytes.Buffer
		w, err := format.NewCompressor(tc.comp, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(want); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, f, err := Decompress(&buf, tc.exts)
		if err != nil {
			t.Fatalf("%s: %v", tc.comp, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, want) || f != tc.format {
			t.Errorf("%s %v: read %q, %v, format %q; want %q, format %q", tc.comp, tc.exts, got, err, f, want, tc.format)
		}
	}
	if _, _, err := Decompress(bytes.NewReader(nil), []string{"gz", "jsonl"}); err == nil {
		t.Error("Decompress accepts a format extension after a compression's")
	}
}
