// Package storagetest holds the helpers the tests of storage and of its
// backends share: open a bucket for a test, write an object in odd-sized
// chunks, read and list what is stored.
package storagetest

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"testing"

	"github.com/spillway/spillway/internal/storage"
)

// Open opens url and closes the bucket when t ends.
func Open(t testing.TB, url string, opts storage.Options) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// Put writes data under key in chunks and commits it.
func Put(t testing.TB, b *storage.Bucket, key string, data []byte) {
	t.Helper()
	w, err := b.NewWriter(context.Background(), key, map[string]string{"k": "v"})
	if err != nil {
		t.Fatalf("NewWriter(%q): %v", key, err)
	}
	WriteChunks(t, w, data)
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit(%q): %v", key, err)
	}
}

// WriteChunks writes data to w in odd-sized chunks, so that part
// boundaries fall mid-write, and checks Written.
func WriteChunks(t testing.TB, w *storage.Writer, data []byte) {
	t.Helper()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 7919)
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatalf("Write: %v", err)
		}
		rest = rest[n:]
	}
	if got := w.Written(); got != int64(len(data)) {
		t.Fatalf("Written = %d, want %d", got, len(data))
	}
}

// Read reads key whole.
func Read(t testing.TB, b *storage.Bucket, key string) []byte {
	t.Helper()
	r, err := b.Read(context.Background(), key)
	if err != nil {
		t.Fatalf("Read(%q): %v", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("Read(%q): %v", key, err)
	}
	return data
}

// List lists prefix, sorted by key.
func List(t testing.TB, b *storage.Bucket, prefix string) []storage.Object {
	t.Helper()
	var out []storage.Object
	if err := b.List(context.Background(), prefix, func(o storage.Object) error {
		out = append(out, o)
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Keys are the objects' keys.
func Keys(objs []storage.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	return ks
}

// Payload is n bytes that are not all alike, so a misplaced part shows.
func Payload(n int) []byte {
	var buf bytes.Buffer
	for i := 0; buf.Len() < n; i++ {
		buf.WriteString("line ")
		buf.WriteByte(byte('a' + i%26))
		buf.WriteString(" 0123456789\n")
	}
	return buf.Bytes()[:n]
}

// Files returns every regular file under dir, relative and slash-separated,
// hidden ones included.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// OpenLocal opens a bucket on a new directory under t's temp dir, and
// returns the directory too.
func OpenLocal(t testing.TB, opts storage.Options) (*storage.Bucket, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	return Open(t, "file://"+dir, opts), dir
}
