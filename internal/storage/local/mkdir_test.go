package local_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/storage/storagetest"
)

// TestLocalDirectoriesRemovedBehindItsBack: the local backend makes a new
// directory from the deepest one it knows exists (makeDir), so it must
// make every missing level again when directories it made were removed
// since, the one it writes into and its parents alike; and a directory it
// never saw is made whole, beside ones it knows.
func TestLocalDirectoriesRemovedBehindItsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	put := func(key string) {
		t.Helper()
		if err := b.Put(ctx, key, []byte(key), nil); err != nil {
			t.Fatalf("Put %s: %v", key, err)
		}
		r, err := b.Read(ctx, key)
		if err != nil {
			t.Fatalf("Read %s: %v", key, err)
		}
		got, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil || string(got) != key {
			t.Fatalf("Read %s = %q, %v", key, got, err)
		}
	}
	put("a/b/c/d/1")
	put("a/b/c/e/2") // a sibling under known parents
	put("a/x/y/3")   // a new branch off a known level

	// The leaf alone, then the whole tree above it.
	if err := os.Remove(filepath.Join(dir, "a/b/c/e/2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "a/b/c/e")); err != nil {
		t.Fatal(err)
	}
	put("a/b/c/e/4")
	if err := os.RemoveAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	put("a/b/c/d/5")
	put("a/b/f/6") // its parent a/b was known, then removed, then made again
	if err := os.RemoveAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	put("a/x/z/7") // a new directory whose known parents are all gone
}
