package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sync/errgroup"
)

// WriteOptions are a write's options besides its key.
type WriteOptions struct {
	// Replace: Commit replaces what is under the key, as one atomic step
	// (readers see the old file or the new one, never a mix), instead of
	// failing with fs.ErrExist.
	Replace bool
	// Owner names who writes the key, when its name doesn't say (see
	// RemoveOwned); "" for none.
	Owner string
}

// NewWriter starts a file under key: a temp file in the key's directory,
// made (and its new directories' parents fsynced) if this process has not
// seen it. Nothing is visible under key until Commit returns nil. The
// context is not used: no call here waits on a network.
func (l *Dir) NewWriter(_ context.Context, key string, o WriteOptions) (*Writer, error) {
	final, err := l.path(key)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(final)
	// The final name is in the temp name, so a later owner of the partition
	// can tell which abandoned temp files are its to remove; or, when the
	// final name doesn't say, the owner is.
	prefix := TempPrefix + filepath.Base(final) + "."
	if o.Owner != "" {
		prefix = ownedTmpPrefix + ownerTag(o.Owner) + "."
	}
	f, err := l.createTemp(dir, prefix)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.writing[f.Name()] = true
	l.mu.Unlock()
	return &Writer{f: f, final: final, l: l, replace: o.Replace}, nil
}

// createTemp creates a new file in dir named prefix and a random suffix,
// making dir first if this process has not seen it. The file gets 0666
// less the umask, as open(2) gives it and as readers of the output (another
// user, a group) expect of other writers' files; os.CreateTemp would make
// it 0600.
func (l *Dir) createTemp(dir, prefix string) (*tempFile, error) {
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
func (l *Dir) makeDir(dir string) error {
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
	// The parents are fsynced at once, not one after the other: all must
	// be durable before a file is made below, in no order, and fsyncs in
	// flight together share the disk's cache flushes. The caller fsyncs
	// one itself: a single new directory (a partition's next 1,000
	// entries) needs no goroutine, and a new partition's four levels
	// three, not four.
	if len(missing) == 0 {
		return nil // the root, or above it: made before the run
	}
	var g errgroup.Group
	for _, d := range missing[1:] {
		g.Go(func() error { return l.syncDir(filepath.Dir(d)) })
	}
	err := l.syncDir(filepath.Dir(missing[0]))
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	for _, d := range missing {
		l.dirs[d] = true
	}
	l.mu.Unlock()
	return nil
}

// Writer is one file being written. After a Write error, only Abort may
// be called; Commit and Abort each end it, and only one of them is called.
type Writer struct {
	f       *tempFile
	final   string
	l       *Dir
	replace bool
	// n bytes written; the kernel was asked to write back the first
	// flushed of them (see Write).
	n, flushed int64
}

func (w *Writer) done() {
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
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.n += int64(n)
	if err == nil && w.n-w.flushed >= writebackStride {
		startWriteback(w.f, w.flushed, w.n-w.flushed)
		w.flushed = w.n
	}
	return n, err
}

// Commit makes the file durable before it becomes visible: fsync the
// data, rename into place, fsync the directory so the rename survives a
// crash. Create-only: an existing file is never replaced (an error for
// which errors.Is(err, fs.ErrExist) holds, and only then), unless the writer was
// made to replace. A failed commit proves nothing about the key (the file
// may be linked, its directory not synced), and leaves no temp file.
func (w *Writer) Commit() error {
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
		var moved bool
		if moved, err = w.moveNoReplace(); moved {
			return w.l.syncDir(filepath.Dir(w.final))
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

// moveNoReplace puts the temp file under its final name unless a file is
// there (fs.ErrExist): a rename that refuses to replace moves it
// in one step (moved); where the filesystem can't, it links, which fails
// if final exists, and the caller removes the temp name.
func (w *Writer) moveNoReplace() (moved bool, err error) {
	moved, err = renameNoReplace(w.f.Name(), w.final)
	if errors.Is(err, fs.ErrExist) {
		err = fmt.Errorf("object %s already exists: %w", w.final, fs.ErrExist)
	}
	if moved || err != nil {
		return moved, err
	}
	err = os.Link(w.f.Name(), w.final)
	if errors.Is(err, fs.ErrExist) {
		err = fmt.Errorf("object %s already exists: %w", w.final, fs.ErrExist)
	}
	return false, err
}

// Abort ends an uncommitted writer: the temp file is closed and removed,
// and nothing becomes visible under its key.
func (w *Writer) Abort() {
	_ = w.f.Close()
	_ = os.Remove(w.f.Name())
	w.done()
}
