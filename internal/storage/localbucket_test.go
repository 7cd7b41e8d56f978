package storage_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/storage/storagetest"
)

// The Bucket's own tests over a local directory (the local backend's are
// in storage/local), and the helpers for them that other tests share.

func TestWriterFinishesOnce(t *testing.T) {
	b, _ := storagetest.OpenLocal(t, storage.Options{})
	w, err := b.NewWriter(context.Background(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.WriteChunks(t, w, []byte("data"))
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err == nil {
		t.Fatal("second Commit succeeded")
	}
	w.Abort() // no-op after Commit
	if got := string(storagetest.Read(t, b, "k")); got != "data" {
		t.Fatalf("Abort after Commit removed or changed the object: %q", got)
	}
}

// Options.Account must see every part buffer come and go.
func TestAccountBalances(t *testing.T) {
	var held, peak atomic.Int64
	account := func(d int64) {
		n := held.Add(d)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
	}
	b, _ := storagetest.OpenLocal(t, storage.Options{PartSize: 4096, Account: account})
	w, err := b.NewWriter(context.Background(), "committed", nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.WriteChunks(t, w, storagetest.Payload(100_000))
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if h := held.Load(); h != 0 {
		t.Fatalf("after Commit %d bytes still accounted", h)
	}
	w, err = b.NewWriter(context.Background(), "aborted", nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.WriteChunks(t, w, storagetest.Payload(100_001))
	w.Abort()
	if h := held.Load(); h != 0 {
		t.Fatalf("after Abort %d bytes still accounted", h)
	}
	if p := peak.Load(); p < 4096 {
		t.Fatalf("peak accounted %d, want at least one part (4096)", p)
	}
}

func TestLocalOpenErrors(t *testing.T) {
	if _, err := storage.Open(context.Background(), "file://", storage.Options{}); err == nil {
		t.Fatal("Open(file://) with no path succeeded")
	}
	f := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Open(context.Background(), "file://"+f+"/sub", storage.Options{}); err == nil {
		t.Fatal("Open under a regular file succeeded")
	}
}
