package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Probe is what a startup check (storage's Bucket.Preflight) asks of the
// directory.
type Probe struct {
	// Key is the throw-away file's key.
	Key string
	// Data is what the file holds.
	Data string
	// WriteAgain writes Key create-only once more, through the writer of
	// every data file, and reports whether the directory took it.
	WriteAgain func(ctx context.Context) (accepted bool, err error)
	// NamePrefix starts the base name of every probe, and StaleAfter is
	// an age no check in flight reaches: older probes (and their temp
	// files) beside Key were left by a check that died.
	NamePrefix string
	StaleAfter time.Duration
}

// Preflight checks that a file can be created, written, synced and
// removed in the directory of the probe, and that a second create-only
// write of it fails (createOnlyIgnored when it did not): the directory is
// created if needed, as every write would. A local probe is always
// removed, and so are the stale ones beside it.
func (l *Dir) Preflight(ctx context.Context, p Probe) (createOnlyIgnored bool, err error) {
	if createOnlyIgnored, err = l.probe(ctx, p); err != nil {
		return createOnlyIgnored, err
	}
	l.removeStaleProbes(p)
	return createOnlyIgnored, nil
}

// removeStaleProbes removes what probes of earlier starts left beside
// p.Key, in the state directory: a process killed during its check leaves
// its probe or the probe's temp file. Only those older than p.StaleAfter
// go: a check in flight, of another process starting now, is younger,
// since no check outlives it. A file that can't be removed stays,
// harmless: the next start tries again.
func (l *Dir) removeStaleProbes(p Probe) {
	path, err := l.path(p.Key)
	if err != nil {
		return
	}
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, p.NamePrefix) && !strings.HasPrefix(name, TempPrefix+p.NamePrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) > p.StaleAfter {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
}

func (l *Dir) probe(ctx context.Context, p Probe) (createOnlyIgnored bool, err error) {
	path, err := l.path(p.Key)
	if err != nil {
		return false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("can't create directory %s (check its parent's owner and mode): %w", dir, err)
	}
	if _, err := os.ReadDir(dir); err != nil {
		return false, fmt.Errorf("can't list directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return false, fmt.Errorf("can't create a file in %s (check the directory's owner and mode): %w", dir, err)
	}
	_, err = f.WriteString(p.Data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// link(2) never replaces, but a file system mounted through FUSE
		// or a network share need not keep that promise.
		createOnlyIgnored, err = p.WriteAgain(ctx)
	}
	if rerr := os.Remove(path); err == nil {
		err = rerr
	}
	if err != nil {
		return createOnlyIgnored, fmt.Errorf("can't write a file in %s: %w", dir, err)
	}
	return createOnlyIgnored, nil
}
