package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
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

	// mu guards writing, dirs and syncs.
	mu sync.Mutex
	// writing holds this process's temp files still being written or
	// committed: removeTemps must not take them for a dead writer's when
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

func openLocal(dir string) (*local, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("storage: create directory %s: %w", dir, err)
	}
	return &local{root: filepath.Clean(dir), writing: map[string]bool{}, dirs: map[string]bool{},
		syncs: map[string]*dirSync{}, commits: make(chan struct{}, localCommits), fsyncDir: syncDir}, nil
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
	// The final name is in the temp name, so a later owner of the partition
	// can tell which abandoned temp files are its to remove; or, when the
	// final name doesn't say, the owner is.
	prefix := tmpPrefix + filepath.Base(final) + "."
	if o.owner != "" {
		prefix = ownedTmpPrefix + ownerTag(o.owner) + "."
	}
	f, err := l.createTemp(dir, prefix)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.writing[f.Name()] = true
	l.mu.Unlock()
	return &localWriter{f: f, final: final, l: l, replace: o.replace}, nil
}

// createTemp creates a new file in dir named prefix and a random suffix,
// making dir first if this process has not seen it. The file gets 0666
// less the umask, as open(2) gives it and as readers of the output (another
// user, a group) expect of other writers' files; os.CreateTemp would make
// it 0600.
func (l *local) createTemp(dir, prefix string) (*tempFile, error) {
	l.mu.Lock()
	known := l.dirs[dir]
	l.mu.Unlock()
	if !known {
		if err := l.makeDir(dir); err != nil {
			return nil, err
		}
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := openExcl(name)
		switch {
		case err == nil:
			return f, nil
		case errors.Is(err, fs.ErrExist) && try < 100:
			continue
		case errors.Is(err, fs.ErrNotExist) && known:
			// Removed since: make it again, once.
			l.mu.Lock()
			delete(l.dirs, dir)
			l.mu.Unlock()
			return l.createTemp(dir, prefix)
		}
		return nil, err
	}
}

// makeDir makes dir and the parents it lacks, as mkdir -p, from the
// deepest one this process knows exists: a new partition's directories
// then cost a mkdir each, not MkdirAll's stat of each level first (and of
// the levels above, which exist). Should a directory it knew have been
// removed behind its back, MkdirAll makes what is missing.
//
// A new directory's name is an entry of its parent, durable only once the
// parent is fsynced, as a file's name is (the commit's syncDir covers the
// directory a file lands in, not the ones above it). Before any file is
// made in them, the parent of each directory it lacked is fsynced (shared
// with other commits' fsyncs of the same directory); only then does it
// count them as made, so that a writer that finds one known never skips
// that fsync.
func (l *local) makeDir(dir string) error {
	var missing []string // dir first, then its parents
	l.mu.Lock()
	for d := dir; !l.dirs[d] && d != l.root && filepath.Dir(d) != d; d = filepath.Dir(d) {
		missing = append(missing, d)
	}
	l.mu.Unlock()
	for i := len(missing) - 1; i >= 0; i-- {
		err := os.Mkdir(missing[i], 0o777) // less the umask, as mkdir -p
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return err
			}
			break
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	// Another goroutine may have made a directory first (ErrExist) and
	// not yet fsynced its parent: each writer syncs every parent itself.
	for _, d := range missing {
		if err := l.syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	l.mu.Lock()
	for _, d := range missing {
		l.dirs[d] = true
	}
	l.mu.Unlock()
	return nil
}

type localWriter struct {
	f       *tempFile
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
	w.l.commits <- struct{}{}
	defer func() { <-w.l.commits }()
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && w.replace {
		// Rename replaces final atomically; the temp name is then gone.
		if err = os.Rename(w.f.Name(), w.final); err == nil {
			return w.l.syncDir(filepath.Dir(w.final))
		}
	}
	if err == nil && !w.replace {
		// Create-only: a rename that refuses to replace moves the temp
		// file into place in one step; where the filesystem can't, link,
		// which fails if final exists, then remove the temp name.
		var moved bool
		moved, err = renameNoReplace(w.f.Name(), w.final)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("object %s already exists: %w", w.final, ErrExists)
		}
		if moved {
			return w.l.syncDir(filepath.Dir(w.final))
		}
		if err == nil {
			err = os.Link(w.f.Name(), w.final)
			if errors.Is(err, fs.ErrExist) {
				err = fmt.Errorf("object %s already exists: %w", w.final, ErrExists)
			}
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
		err = w.l.syncDir(filepath.Dir(w.final))
	}
	return err
}

// commitHoldsNoPart tells the part queue that a local commit sends no
// part: it need not wait for one of the bucket's upload slots, which bound
// the part buffers handed to storage at once (local.commits bounds the
// commits).
func (*localWriter) commitHoldsNoPart() {}

func (w *localWriter) abort() {
	_ = w.f.Close()
	_ = os.Remove(w.f.Name())
	w.done()
}

// dirSync is the fsync of one directory that commits share: a commit that
// linked its file joins the round not started yet, and one fsync started
// after every joiner's link makes all of them durable. Files closed about
// together in one directory so cost one directory fsync, not one each.
type dirSync struct {
	next    *syncRound // the round that commits join; nil when none waits
	running bool       // a goroutine runs rounds
}

type syncRound struct {
	done   chan struct{}
	err    error
	joined int // callers waiting on it, under local.mu
}

// syncDir returns once an fsync of dir that started after the call did
// ended, with its error: what the caller renamed or linked into dir before
// is durable then.
func (l *local) syncDir(dir string) error {
	l.mu.Lock()
	d := l.syncs[dir]
	if d == nil {
		d = &dirSync{}
		l.syncs[dir] = d
	}
	if d.next == nil {
		d.next = &syncRound{done: make(chan struct{})}
	}
	r := d.next
	r.joined++
	lead := !d.running
	d.running = true
	l.mu.Unlock()
	if lead {
		l.syncRounds(dir, d)
	}
	<-r.done
	return r.err
}

// syncRounds runs the round of d that waits, then, if another one gathered
// meanwhile, hands the next to a goroutine of its own, so that the caller
// waits for one round, not for everyone's.
func (l *local) syncRounds(dir string, d *dirSync) {
	l.mu.Lock()
	r := d.next
	d.next = nil
	l.mu.Unlock()
	r.err = l.fsyncDir(dir)
	// The bookkeeping comes before the round's callers are let go, so
	// that a caller that returns sees the directory's state settled.
	l.mu.Lock()
	last := d.next == nil
	if last {
		d.running = false
		delete(l.syncs, dir)
	}
	l.mu.Unlock()
	close(r.done)
	if !last {
		go l.syncRounds(dir, d)
	}
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
