package local

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// tempFile is a file being written, by its descriptor. An *os.File would
// cost a system call per file for nothing: making one asks fcntl whether
// the descriptor is non-blocking, and a regular file's never is. A local
// commit makes two files (the data file and its ledger entry).
type tempFile struct {
	fd   int
	name string
}

// Name is the file's path.
func (f *tempFile) Name() string { return f.name }

// Write writes all of p, as os.File.Write does.
func (f *tempFile) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(f.fd, p[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
		if m == 0 {
			return n, &os.PathError{Op: "write", Path: f.name, Err: io.ErrShortWrite}
		}
		n += m
	}
	return n, nil
}

// Sync is fsync.
func (f *tempFile) Sync() error {
	for {
		err := unix.Fsync(f.fd)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fsync", Path: f.name, Err: err}
		}
		return nil
	}
}

// Close closes the descriptor; a second Close does nothing.
func (f *tempFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &os.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// startWriteback asks the kernel to start writing n bytes of f from off
// to disk, and returns without waiting for them. It is a hint: commit's
// fsync is what makes the file durable, so an error is of no consequence.
func startWriteback(f *tempFile, off, n int64) {
	_ = unix.SyncFileRange(f.fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// renameNoReplace moves oldpath to newpath unless newpath exists (an error
// for which errors.Is(err, fs.ErrExist) holds), in one step. moved is false
// with a nil error where the filesystem can't (renameat2 with
// RENAME_NOREPLACE: Linux 3.15, and ext4, xfs, btrfs, tmpfs and others, not
// every filesystem): the caller links and removes instead.
func renameNoReplace(oldpath, newpath string) (moved bool, err error) {
	err = unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	}
	return false, &os.LinkError{Op: "renameat2", Old: oldpath, New: newpath, Err: err}
}

// openExcl creates name, which must not exist, for reading and writing,
// with mode 0666 less the umask. os.OpenFile would also ask the runtime's
// poller to take the file (which it refuses for a regular file) and set
// and clear non-blocking mode: five system calls more per file; and
// os.NewFile one (see tempFile).
func openExcl(name string) (*tempFile, error) {
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return &tempFile{fd: fd, name: name}, nil
}

// syncDir fsyncs a directory: what was renamed or linked into it is
// durable once it returns nil.
func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	err = unix.Fsync(fd)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}
