// Package spool stages the records of open files on local disk, so that an
// open file costs almost no memory (docs/design.md, "Spool"). A file's
// records are appended to its spool file as they arrive and read back once,
// when the file is closed and encoded. Nothing here is durable state: a
// spool file is never the source of truth, and a process that starts
// removes what dead processes left.
//
// Each process works in a subdirectory of its own under the spool
// directory, named by a lock file it holds (flock) for as long as it runs:
// processes sharing the directory never touch each other's files, and a
// subdirectory whose lock nobody holds was left by a process that is gone.
package spool

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

const (
	dirPrefix = "spillway-"
	lockExt   = ".lock"
)

// Spool is one process's subdirectory of the spool directory.
type Spool struct {
	root string
	dir  string
	seq  atomic.Int64
	log  *slog.Logger

	// mu guards lock, which recreate replaces.
	mu   sync.Mutex
	lock *os.File
}

// Open creates this process's subdirectory under root (created if need
// be), locks it, and removes the subdirectories of processes that are
// gone. Removed reports how many it removed.
func Open(root string) (s *Spool, removed int, err error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, 0, fmt.Errorf("create spool directory: %w", err)
	}
	s = &Spool{root: root, log: slog.New(slog.DiscardHandler)}
	// The lock file comes first and the subdirectory second, both only
	// once the lock is held: a subdirectory whose lock file is gone or
	// free belongs to nobody.
	for range 10 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := fmt.Sprintf("%s%d-%s", dirPrefix, os.Getpid(), hex.EncodeToString(b[:]))
		lock, err := lockNew(filepath.Join(root, name+lockExt))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		s.lock, s.dir = lock, filepath.Join(root, name)
		break
	}
	if s.lock == nil {
		return nil, 0, fmt.Errorf("create spool lock in %s: no free name", root)
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		s.Close()
		return nil, 0, fmt.Errorf("create spool directory: %w", err)
	}
	removed, err = s.removeStale()
	if err != nil {
		s.Close()
		return nil, 0, err
	}
	return s, removed, nil
}

// lockNew creates path and locks it. A lock taken on a file that a
// cleaner removed meanwhile is worthless: then it reports fs.ErrExist, to
// try another name.
func lockNew(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		return nil, fmt.Errorf("create spool lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		// Another process locked it between our create and our lock: it
		// is cleaning it up.
		return nil, fs.ErrExist
	}
	if !samePath(f, path) {
		f.Close()
		return nil, fs.ErrExist
	}
	return f, nil
}

func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// removeStale removes the subdirectories (and lock files) under root whose
// lock no live process holds.
func (s *Spool) removeStale() (int, error) {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return 0, fmt.Errorf("read spool directory: %w", err)
	}
	seen := map[string]bool{}
	n := 0
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), lockExt)
		if !strings.HasPrefix(name, dirPrefix) || seen[name] || filepath.Join(s.root, name) == s.dir {
			continue
		}
		seen[name] = true
		ok, err := removeIfFree(filepath.Join(s.root, name))
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// removeIfFree removes dir and its lock file if nobody holds the lock. A
// dir without a lock file is left by a cleaner that stopped halfway (the
// lock file goes last): nobody owns it either.
func removeIfFree(dir string) (bool, error) {
	lockPath := dir + lockExt
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.RemoveAll(dir); err != nil {
			return false, fmt.Errorf("remove stale spool: %w", err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("open spool lock: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // a live process's
		}
		return false, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if !samePath(f, lockPath) {
		return false, nil // removed by another cleaner meanwhile
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("remove stale spool: %w", err)
	}
	if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove stale spool lock: %w", err)
	}
	return true, nil
}

// Dir is this process's subdirectory.
func (s *Spool) Dir() string { return s.dir }

// SetLogger sets where Create reports a subdirectory it had to create
// again. Call it before the spool is used.
func (s *Spool) SetLogger(log *slog.Logger) { s.log = log }

// Close removes this process's subdirectory and releases its lock.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.dir != "" {
		err = os.RemoveAll(s.dir)
	}
	if s.lock != nil {
		if rerr := os.Remove(s.lock.Name()); err == nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
		}
		s.lock.Close()
	}
	return err
}

// Create starts a new spool file. When this process's subdirectory was
// removed under it (by hand, or by a cleaner of the directory), it is
// created again, with its lock file, and the spool goes on.
func (s *Spool) Create() (*File, error) {
	path := filepath.Join(s.dir, fmt.Sprintf("%d.spool", s.seq.Add(1)))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if rerr := s.recreate(); rerr != nil {
			return nil, fmt.Errorf("create spool file: the spool directory %s was removed, and creating it again failed: %w", s.dir, rerr)
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	return &File{f: f}, nil
}

// recreate creates this process's subdirectory again, and its lock file
// first if that is gone too: a subdirectory without a held lock would be
// removed by the next process to start, as a dead process's.
func (s *Spool) recreate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, err := os.Stat(s.dir); err == nil && st.IsDir() {
		return nil // another file's Create did it
	}
	if err := os.MkdirAll(s.root, 0o700); err != nil {
		return err
	}
	if !samePath(s.lock, s.lock.Name()) {
		lock, err := lockNew(s.lock.Name())
		if err != nil {
			return fmt.Errorf("lock %s again: %w", s.lock.Name(), err)
		}
		s.lock.Close()
		s.lock = lock
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	s.log.Warn("the spool directory was removed while in use; created it again (files open on the spool at the time go on from their removed spool files)", "dir", s.dir)
	return nil
}

// Free is the space free on dir's file system for an unprivileged
// process, in bytes.
func Free(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("read free space: %w", err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
