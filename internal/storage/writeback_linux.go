package storage

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f from off
// to disk, and returns without waiting for them. It is a hint: commit's
// fsync is what makes the file durable, so an error is of no consequence.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
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
// and clear non-blocking mode: five system calls more per file.
func openExcl(name string) (*os.File, error) {
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
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
