package main

import (
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// barrier is a group commit of the whole filesystem: wait returns once a
// syncfs(2) of the filesystem, then an fsync(2) of one file on it, started
// after the call did have ended. syncfs writes back every dirty page and
// inode of the filesystem and its block device's buffers (directories,
// inode tables); the fsync after it issues the disk's cache flush, which
// on ext4 without a journal syncfs issues before it writes those buffers.
type barrier struct {
	fd      int
	probe   *os.File
	mu      sync.Mutex
	next    chan struct{} // the round callers join; nil when none waits
	nextErr *error
	running bool
}

func newBarrier(root string) (*barrier, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	probe, err := os.Create(filepath.Join(root, ".barrier"))
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &barrier{fd: fd, probe: probe}, nil
}

func (b *barrier) close() {
	unix.Close(b.fd)
	b.probe.Close()
}

func (b *barrier) wait() error {
	b.mu.Lock()
	if b.next == nil {
		b.next, b.nextErr = make(chan struct{}), new(error)
	}
	done, errp := b.next, b.nextErr
	lead := !b.running
	b.running = true
	b.mu.Unlock()
	if lead {
		b.rounds()
	}
	<-done
	return *errp
}

func (b *barrier) rounds() {
	for {
		b.mu.Lock()
		done, errp := b.next, b.nextErr
		b.next, b.nextErr = nil, nil
		if done == nil {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		err := unix.Syncfs(b.fd)
		if err == nil {
			err = b.probe.Sync()
		}
		*errp = err
		close(done)
	}
}

// publishSyncfs publishes as publish does, each fsync replaced by the
// barrier: both files written, one barrier, the entry renamed, one
// barrier, the data file renamed, one barrier.
func publishSyncfs(b *barrier, dataDir string, i, parts int, root string, data, entry []byte) error {
	lt, lf, dt, df := paths(root, dataDir, i, parts)
	for _, w := range []struct {
		name string
		b    []byte
	}{{lt, entry}, {dt, data}} {
		if err := os.WriteFile(w.name, w.b, 0o666); err != nil {
			return err
		}
	}
	if err := b.wait(); err != nil {
		return err
	}
	if err := os.Rename(lt, lf); err != nil {
		return err
	}
	if err := b.wait(); err != nil {
		return err
	}
	if err := os.Rename(dt, df); err != nil {
		return err
	}
	return b.wait()
}
