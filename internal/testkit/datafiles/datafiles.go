// Package datafiles writes data files as Spillway does, for the tests of
// the packages that read them back (audit's deep scan, ledger's legacy
// resume, readback). It is for tests only: nothing outside a _test.go file
// imports it.
//
// It imports config, format and storage but none of the packages whose
// tests use it, so that their in-package tests can import it without a
// cycle.
package datafiles

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/storage"
)

// Write writes records of the given offsets as Spillway does, with
// format's own encoder and compressor, under key in dir; avro blocks and
// parquet row groups are cut at 8 KiB.
func Write(t testing.TB, dir string, key, typ, comp string, offsets ...int64) {
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
	Put(t, dir, key, buf.Bytes())
}

// Put writes data under key in dir, making the folders the key names.
func Put(t testing.TB, dir, key string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// OpenDir opens dir as a file:// bucket, closed when t ends.
func OpenDir(t testing.TB, dir string) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
