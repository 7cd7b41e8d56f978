package local

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestNewDirectoriesAreSynced: a file in a directory the local backend
// made is durable only if the new directory's name is too, which is an
// entry of its parent: the parent of every directory it makes is fsynced
// before the commit returns, once (a second file in the same directories
// fsyncs only its own). A crash can't be staged in-process, so the test
// watches which directories are fsynced, through the real fsync.
func TestNewDirectoriesAreSynced(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var synced []string
	l.fsyncDir = func(dir string) error {
		rel, err := filepath.Rel(l.root, dir)
		if err != nil {
			return err
		}
		mu.Lock()
		synced = append(synced, filepath.ToSlash(rel))
		mu.Unlock()
		return syncDir(dir)
	}
	put := func(key string) {
		t.Helper()
		w, err := l.NewWriter(context.Background(), key, WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(key)); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := slices.Clone(synced)
		synced = nil
		slices.Sort(got)
		return slices.Compact(got)
	}
	put("a/b/c/1")
	if got, want := take(), []string{".", "a", "a/b", "a/b/c"}; !slices.Equal(got, want) {
		t.Fatalf("directories fsynced by the first file in a/b/c = %q, want %q: the new directories' names must be durable", got, want)
	}
	put("a/b/c/2")
	if got, want := take(), []string{"a/b/c"}; !slices.Equal(got, want) {
		t.Fatalf("directories fsynced by the second file = %q, want %q", got, want)
	}
	put("a/d/3")
	if got, want := take(), []string{"a", "a/d"}; !slices.Equal(got, want) {
		t.Fatalf("directories fsynced by the first file in a/d = %q, want %q", got, want)
	}
}
