package storage_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/storage/storagetest"
)

// WaitQueued holds a writer back while storage has not taken what it
// queued, and lets it go as soon as storage has, or when its context ends.
func TestWaitQueued(t *testing.T) {
	faults := &storage.Faults{}
	b, _ := storagetest.OpenLocal(t, storage.Options{PartSize: 64 << 10, Faults: faults})
	chunk := b.ChunkSize()
	w, err := b.NewWriter(t.Context(), "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()

	// Nothing queued: no wait, even with a dead context.
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.WaitQueued(dead, 0); err != nil {
		t.Fatalf("WaitQueued with nothing queued = %v, want nil at once", err)
	}

	faults.Stall()
	if _, err := w.Write(make([]byte, 3*chunk)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.WaitQueued(ctx, chunk) }()
	select {
	case err := <-done:
		t.Fatalf("WaitQueued returned (%v) while storage is stalled with 3 chunks queued", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitQueued after its context ended = %v, want context.Canceled", err)
	}

	go func() { done <- w.WaitQueued(t.Context(), chunk) }()
	faults.Resume()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitQueued once storage took the chunks = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("WaitQueued still waits after storage resumed")
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestFootprintOf(t *testing.T) {
	const part = 8 << 20
	for _, tc := range []struct {
		scheme string
		want   storage.Footprint
	}{
		{"file", storage.Footprint{Writer: 0, Chunk: 256 << 10, Upload: 256 << 10}},
		{"s3", storage.Footprint{Writer: 5 * part, Chunk: 256 << 10, Upload: part}},
		{"gs", storage.Footprint{Writer: part, Chunk: 256 << 10, Upload: part}},
		{"azblob", storage.Footprint{Writer: part, Chunk: 256 << 10, Upload: part}},
	} {
		if got := storage.FootprintOf(tc.scheme, part); got != tc.want {
			t.Errorf("FootprintOf(%s, 8MiB) = %+v, want %+v", tc.scheme, got, tc.want)
		}
	}
	if got := storage.FootprintOf("s3", 0); got.Upload != 8<<20 {
		t.Errorf("FootprintOf(s3, 0) = %+v, want the default part of 8MiB", got)
	}
	// A bucket reports what FootprintOf says.
	b, _ := storagetest.OpenLocal(t, storage.Options{PartSize: part})
	if f := storage.FootprintOf("file", part); b.WriterMemory() != f.Writer || b.ChunkSize() != f.Chunk {
		t.Errorf("file bucket: WriterMemory %d, ChunkSize %d; FootprintOf %+v", b.WriterMemory(), b.ChunkSize(), f)
	}
}
