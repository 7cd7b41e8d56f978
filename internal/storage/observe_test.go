package storage

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	requests []string // backend/op
	failed   []string // backend/op/class
	retries  []string // backend/class
}

func (r *recorder) Request(backend, op string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < 0 {
		panic("negative duration")
	}
	r.requests = append(r.requests, backend+"/"+op)
}

func (r *recorder) Failed(backend, op, class string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, backend+"/"+op+"/"+class)
}

func (r *recorder) Retry(backend, class string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries = append(r.retries, backend+"/"+class)
}

func (r *recorder) snapshot() (requests, failed, retries []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests), slices.Clone(r.failed), slices.Clone(r.retries)
}

// The observer hears every call of a local bucket, and a create-only
// commit to a taken key as a failure of class exists.
func TestObserverLocal(t *testing.T) {
	ctx := context.Background()
	var rec recorder
	b, err := Open(ctx, "file://"+t.TempDir(), Options{Observer: &rec})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Put(ctx, "a/one", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "a/one", []byte("y"), nil); !errors.Is(err, ErrExists) {
		t.Fatalf("second Put = %v, want ErrExists", err)
	}
	if err := b.List(ctx, "a/", func(Object) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Stat(ctx, "a/one"); err != nil {
		t.Fatal(err)
	}
	r, err := b.Read(ctx, "a/one")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r)
	r.Close()
	requests, failed, retries := rec.snapshot()
	if want := []string{"file/commit", "file/commit", "file/list", "file/stat", "file/read"}; !slices.Equal(requests, want) {
		t.Errorf("requests %v, want %v", requests, want)
	}
	if want := []string{"file/commit/exists"}; !slices.Equal(failed, want) {
		t.Errorf("failures %v, want %v", failed, want)
	}
	if len(retries) != 0 {
		t.Errorf("retries %v on a local bucket", retries)
	}
}
