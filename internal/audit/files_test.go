package audit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/storage"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The helpers below write data files as Spillway does, for the deep scan
// to read back; ledger's tests (the legacy resume) and readback's have
// their own.

// writeFile writes records of the given offsets as Spillway does, with
// format's own encoder and compressor, under key; avro blocks and parquet
// row groups are cut at 8 KiB.
func writeFile(t *testing.T, dir string, key, typ, comp string, offsets ...int64) {
	t.Helper()
	var buf bytes.Buffer
	cfg := config.Format{Type: typ, Compression: comp, Fields: []string{"key", "value", "offset"}, ValueEncoding: "none", Envelope: true}
	w, err := format.NewCompressor(formats.Of(cfg.Type).StreamCompression(cfg), &buf)
	if err != nil {
		t.Fatal(err)
	}
	// Small blocks and row groups, so that a file has several and damage
	// can fall in the middle of one.
	enc, err := formats.NewBufferedEncoder(cfg, w, format.Memory{FlushBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offsets {
		if err := enc.Encode(&kgo.Record{Offset: o, Key: []byte("k"), Value: fmt.Appendf(nil, `{"n":%d,"nested":{"offset":-1}}`, o)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	putFile(t, dir, key, buf.Bytes())
}

func putFile(t *testing.T, dir, key string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func openDir(t *testing.T, dir string) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// flip inverts the bits of d[i].
func flip(d []byte, i int) []byte {
	d[i] ^= 0xff
	return d
}
