package local_test

import (
	"bytes"
	"context"
	"io"
	"sort"
	"testing"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/storage"
)

// TestMain is the one TestMain of package local's tests: goleak checks
// that no directory sync round, writer or bucket leaves a goroutine
// behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests of the local backend's behaviour go through storage.Bucket, the
// way every caller reaches it (as gocloud's fileblob tests go through
// blob): what they assert is the Storage contract on a directory. Only the
// test binary imports storage; package local itself does not.

func open(t *testing.T, url string, opts storage.Options) *storage.Bucket {
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

// put writes data under key in chunks and commits it.
func put(t *testing.T, b *storage.Bucket, key string, data []byte) {
	t.Helper()
	w, err := b.NewWriter(context.Background(), key, map[string]string{"k": "v"})
	if err != nil {
		t.Fatalf("NewWriter(%q): %v", key, err)
	}
	writeChunks(t, w, data)
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit(%q): %v", key, err)
	}
}

func writeChunks(t *testing.T, w *storage.Writer, data []byte) {
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

func read(t *testing.T, b *storage.Bucket, key string) []byte {
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

func list(t *testing.T, b *storage.Bucket, prefix string) []storage.Object {
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

func keys(objs []storage.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	return ks
}

// payload is n bytes that are not all alike, so a misplaced part shows.
func payload(n int) []byte {
	var buf bytes.Buffer
	for i := 0; buf.Len() < n; i++ {
		buf.WriteString("line ")
		buf.WriteByte(byte('a' + i%26))
		buf.WriteString(" 0123456789\n")
	}
	return buf.Bytes()[:n]
}
