// Package local is storage's local-directory backend: files under one
// directory, with the durability that gocloud's fileblob does not give. A
// commit fsyncs the file, moves it into place without replacing what is
// there (create-only), and fsyncs its directory, shared with the other
// commits into that directory (group fsync); a new directory's parent is
// fsynced before a file is made in it. Files being written are hidden temp
// files beside their final name, which listings skip.
//
// Package storage opens it for file:// URLs and adapts it to its backend
// contract (storage.go); this package knows nothing of storage, and its
// errors are the OS's: a commit to a key that is taken fails with one for
// which errors.Is(err, fs.ErrExist) holds, which storage reports as its
// ErrExists. So the clouds' SDKs, which storage's error classes import,
// are not linked into what imports this package alone.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// TempPrefix marks files being written. They live in the target directory
// so that the final rename is atomic, and List skips them.
const TempPrefix = ".spillway-tmp-"

// Dir is a local directory opened as a bucket. It is safe for concurrent
// use by many writers and readers; one Writer is used by one goroutine at
// a time.
type Dir struct {
	root string

	// mu guards writing, dirs and syncs.
	mu sync.Mutex
	// writing holds this process's temp files still being written or
	// committed: walkTemps must not take them for a dead writer's when
	// a partition comes back to this process before its upload ended.
	writing map[string]bool
	// dirs holds the directories this process made or found: a write
	// into one needs no MkdirAll (a stat per level). One removed behind
	// our back is made again when creating the temp file fails.
	dirs map[string]bool
	// syncs holds, per directory, the fsync that commits waiting on it
	// share (syncDir).
	syncs map[string]*dirSync
	// commits bounds the commits (each an fsync or two, each a thread
	// blocked in the kernel) in flight at once.
	commits chan struct{}
	// fsyncDir is syncDir; a test watches the rounds through it.
	fsyncDir func(dir string) error
}

// localCommits is how many local commits may wait on the disk at once.
// More fsyncs in flight let the filesystem's journal commit more files in
// one flush; each holds an OS thread while it waits.
const localCommits = 64

// Open opens dir as a bucket, making it first if it does not exist.
func Open(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("storage: create directory %s: %w", dir, err)
	}
	return &Dir{root: filepath.Clean(dir), writing: map[string]bool{}, dirs: map[string]bool{},
		syncs: map[string]*dirSync{}, commits: make(chan struct{}, localCommits), fsyncDir: syncDir}, nil
}

func (l *Dir) path(key string) (string, error) {
	p := filepath.Join(l.root, filepath.FromSlash(key))
	if rel, err := filepath.Rel(l.root, p); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("key %q escapes the storage directory", key)
	}
	return p, nil
}

// List calls fn for every committed file whose key starts with prefix, in
// no promised order, and stops at fn's first error, returning it. Temp
// files and other dot names are never shown.
func (l *Dir) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	// Walk only the deepest directory the prefix names.
	start := l.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(l.root, filepath.FromSlash(prefix[:i]))
		if rel, err := filepath.Rel(l.root, start); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("prefix %q escapes the storage directory", prefix)
		}
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return fn(key, info.Size())
	})
	return err
}

// ListDir calls fn, in lexical order, for each name directly under prefix
// up to the next "/": a file (its full key and size) or a directory (its
// full key ending in "/", dir set).
func (l *Dir) ListDir(ctx context.Context, prefix string, fn func(key string, size int64, dir bool) error) error {
	dirKey, base := "", prefix
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dirKey, base = prefix[:i+1], prefix[i+1:]
	}
	dir := l.root
	if dirKey != "" {
		var err error
		if dir, err = l.path(strings.TrimSuffix(dirKey, "/")); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name := e.Name()
		if !strings.HasPrefix(name, base) || (!e.IsDir() && strings.HasPrefix(name, ".")) {
			continue
		}
		if e.IsDir() {
			if err := fn(dirKey+name+"/", 0, true); err != nil {
				return err
			}
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(dirKey+name, info.Size(), false); err != nil {
			return err
		}
	}
	return nil
}

// Stat returns the size of the file under key; ok is false when there is
// none (or a directory is there).
func (l *Dir) Stat(_ context.Context, key string) (size int64, ok bool, err error) {
	p, err := l.path(key)
	if err != nil {
		return 0, false, err
	}
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if info.IsDir() {
		return 0, false, nil
	}
	return info.Size(), true, nil
}

// Read opens a committed file.
func (l *Dir) Read(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Close releases the directory: nothing to do, it holds no descriptor.
func (l *Dir) Close() error { return nil }
