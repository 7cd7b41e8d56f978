//go:build !linux

package local

import "os"

// tempFile is a file being written.
type tempFile struct{ *os.File }

// startWriteback is a no-op where sync_file_range does not exist: commit's
// fsync writes the whole file.
func startWriteback(*tempFile, int64, int64) {}

// renameNoReplace can't rename without replacing here: the caller links
// and removes instead.
func renameNoReplace(string, string) (bool, error) { return false, nil }

// openExcl creates name, which must not exist, with mode 0666 less the
// umask.
func openExcl(name string) (*tempFile, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, err
	}
	return &tempFile{f}, nil
}

// syncDir fsyncs a directory: what was renamed or linked into it is
// durable once it returns nil.
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
