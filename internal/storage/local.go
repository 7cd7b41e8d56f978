package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// chunkSize is the unit of the part queue: big enough to turn encoder
// writes into few syscalls, small enough that many open files stay cheap.
const chunkSize = 256 << 10

// tmpPrefix marks files being written. They live in the target directory so
// that the final rename is atomic, and List skips them.
const tmpPrefix = ".spillway-tmp-"

// ownedTmpPrefix marks the temp files of writes with an owner
// (ReplaceOwned). The final name doesn't say which partition writes it,
// so the temp file's name says so instead: ownedTmpPrefix, ownerTag,
// ".", a random suffix. removeAbandoned never takes them for its own
// (their prefix differs from tmpPrefix).
const ownedTmpPrefix = ".spillway-tmp@"

// ownerTag is what an owned temp file's name holds of its owner: 64 bits
// of its SHA-256, in hex. A topic name alone may take 249 of a file name's
// 255 bytes, so the owner can't be written out; two owners of one
// directory share a tag with odds of about n²/2⁶⁵ for n owners.
func ownerTag(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:8])
}

type local struct {
	root string
	// fileMode is what a committed file gets: 0666 less the process's
	// umask, as open(2) would give it, since os.CreateTemp makes 0600.
	fileMode os.FileMode

	// writing holds this process's temp files still being written or
	// committed: removeTemps must not take them for a dead writer's when
	// a partition comes back to this process before its upload ended.
	mu      sync.Mutex
	writing map[string]bool
}

func openLocal(dir string) (*local, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("storage: create directory %s: %w", dir, err)
	}
	return &local{root: filepath.Clean(dir), fileMode: 0o666 &^ processUmask(), writing: map[string]bool{}}, nil
}

// defaultUmask is assumed where the umask can't be read without changing
// it: the usual one, which gives 0644 files.
const defaultUmask os.FileMode = 0o022

// processUmask reads the umask from /proc/self/status (Linux 4.7 and
// later). syscall.Umask can only read it by setting it, and the umask is
// the process's: a file another goroutine created between the two calls
// would get the wrong mode.
func processUmask() os.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return defaultUmask
	}
	return parseUmask(string(b))
}

// parseUmask takes the "Umask:" line of a /proc/<pid>/status text, or
// defaultUmask without one.
func parseUmask(status string) os.FileMode {
	for line := range strings.Lines(status) {
		v, ok := strings.CutPrefix(line, "Umask:")
		if !ok {
			continue
		}
		m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		if err != nil || m > 0o777 {
			return defaultUmask
		}
		return os.FileMode(m)
	}
	return defaultUmask
}

func (l *local) path(key string) (string, error) {
	p := filepath.Join(l.root, filepath.FromSlash(key))
	if rel, err := filepath.Rel(l.root, p); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("key %q escapes the storage directory", key)
	}
	return p, nil
}

func (l *local) newWriter(_ context.Context, key string, _ map[string]string, o writeOpts) (objectWriter, error) {
	final, err := l.path(key)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o777); err != nil { // less the umask, as mkdir -p
		return nil, err
	}
	// The final name is in the temp name, so a later owner of the partition
	// can tell which abandoned temp files are its to remove; or, when the
	// final name doesn't say, the owner is.
	pattern := tmpPrefix + filepath.Base(final) + ".*"
	if o.owner != "" {
		pattern = ownedTmpPrefix + ownerTag(o.owner) + ".*"
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	// CreateTemp makes the file 0600 whatever the umask; readers of the
	// output (another user, a group) expect what other writers give.
	if err := f.Chmod(l.fileMode); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	l.mu.Lock()
	l.writing[f.Name()] = true
	l.mu.Unlock()
	return &localWriter{f: f, final: final, l: l, replace: o.replace}, nil
}

type localWriter struct {
	f       *os.File
	final   string
	l       *local
	replace bool
	// n bytes written; the kernel was asked to write back the first
	// flushed of them (see Write).
	n, flushed int64
}

func (w *localWriter) done() {
	w.l.mu.Lock()
	delete(w.l.writing, w.f.Name())
	w.l.mu.Unlock()
}

// writebackStride is how much a local file takes before the kernel is
// asked to start writing it back.
const writebackStride = 4 << 20

// Write appends p and, every writebackStride bytes, starts the kernel
// writing back what came before, without waiting for it. Left to itself
// the kernel holds a file's pages dirty until memory or a timer presses,
// so the fsync at commit would write the whole file while its partition
// waits, and the dirty pages weigh on the process's cgroup meanwhile.
func (w *localWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.n += int64(n)
	if err == nil && w.n-w.flushed >= writebackStride {
		startWriteback(w.f, w.flushed, w.n-w.flushed)
		w.flushed = w.n
	}
	return n, err
}

// commit makes the file durable before it becomes visible: fsync the
// data, rename into place, fsync the directory so the rename survives a
// crash. Create-only: an existing object is never replaced, unless the
// writer was made to replace.
func (w *localWriter) commit() error {
	defer w.done()
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && w.replace {
		// Rename replaces final atomically; the temp name is then gone.
		if err = os.Rename(w.f.Name(), w.final); err == nil {
			return syncDir(filepath.Dir(w.final))
		}
	}
	if err == nil && !w.replace {
		// Link fails if final exists, which gives create-only semantics.
		err = os.Link(w.f.Name(), w.final)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("object %s already exists: %w", w.final, ErrExists)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Lstat(w.f.Name()); errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("the file's temporary copy %s was removed while it was written: another process took the partition over (a partition's new owner removes its dead writers' temporary files), or another deployment writes into this directory, which must have its own storage.prefix: %w", w.f.Name(), err)
		}
	}
	rmErr := os.Remove(w.f.Name())
	if err == nil {
		err = rmErr
	}
	if err == nil {
		err = syncDir(filepath.Dir(w.final))
	}
	return err
}

func (w *localWriter) abort() {
	_ = w.f.Close()
	_ = os.Remove(w.f.Name())
	w.done()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (l *local) list(ctx context.Context, prefix string, fn func(Object) error) error {
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
		return fn(Object{Key: key, Size: info.Size()})
	})
	return err
}

func (l *local) listDir(ctx context.Context, prefix string, fn func(Object) error) error {
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
			if err := fn(Object{Key: dirKey + name + "/", Dir: true}); err != nil {
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
		if err := fn(Object{Key: dirKey + name, Size: info.Size()}); err != nil {
			return err
		}
	}
	return nil
}

func (l *local) stat(_ context.Context, key string) (Object, bool, error) {
	p, err := l.path(key)
	if err != nil {
		return Object{}, false, err
	}
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Object{}, false, nil
	}
	if err != nil {
		return Object{}, false, err
	}
	if info.IsDir() {
		return Object{}, false, nil
	}
	return Object{Key: key, Size: info.Size()}, true, nil
}

func (l *local) read(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

func (l *local) close() error { return nil }

// removeAbandoned deletes temp files left by a process that died while
// writing, whose final key starts with prefix and belongs(key) says is
// ours.
func (l *local) removeAbandoned(ctx context.Context, prefix string, belongs func(key string) bool) error {
	return l.walkTemps(ctx, prefix, func(p, key, name string) bool {
		name, ok := strings.CutPrefix(name, tmpPrefix)
		if !ok {
			return false
		}
		// Strip CreateTemp's random suffix.
		if i := strings.LastIndexByte(name, '.'); i > 0 {
			name = name[:i]
		}
		final := path.Join(path.Dir(key), name)
		return strings.HasPrefix(final, prefix) && belongs(final)
	})
}

// removeOwned deletes the temp files of owned writes (ownedTmpPrefix)
// under prefix whose owner is one of owners.
func (l *local) removeOwned(ctx context.Context, prefix string, owners []string) error {
	tags := make(map[string]bool, len(owners))
	for _, o := range owners {
		tags[ownerTag(o)] = true
	}
	return l.walkTemps(ctx, prefix, func(_, _, name string) bool {
		rest, ok := strings.CutPrefix(name, ownedTmpPrefix)
		if !ok {
			return false
		}
		tag, _, ok := strings.Cut(rest, ".")
		return ok && tags[tag]
	})
}

// walkTemps removes the hidden files, under the directories whose keys can
// start with prefix, that remove(path, key, base name) accepts, except
// those this process is writing. A file's temp file is in its final
// directory, which can be any directory under the prefix's (a template
// with a variable before {{start_offset}}, or a "/" after it): the walk
// goes into every directory whose keys can start with prefix, and into no
// other.
func (l *local) walkTemps(ctx context.Context, prefix string, remove func(p, key, name string) bool) error {
	start := l.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		var err error
		if start, err = l.path(prefix[:i]); err != nil {
			return err
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
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p != start && !strings.HasPrefix(key+"/", prefix) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(d.Name(), ".") || !remove(p, key, d.Name()) {
			return nil
		}
		l.mu.Lock()
		ours := l.writing[p]
		l.mu.Unlock()
		if ours {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	return err
}
