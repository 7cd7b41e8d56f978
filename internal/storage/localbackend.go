package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"

	"github.com/spillway/spillway/internal/storage/local"
)

// localBackend is the backend of file:// URLs: package local, behind the
// backend interface.
type localBackend struct{ d *local.Dir }

// newWriter ignores meta: a local file has no metadata.
func (b localBackend) newWriter(ctx context.Context, key string, _ map[string]string, o writeOpts) (objectWriter, error) {
	w, err := b.d.NewWriter(ctx, key, local.WriteOptions{Replace: o.replace, Owner: o.owner})
	if err != nil {
		return nil, err
	}
	return localWriter{w}, nil
}

func (b localBackend) list(ctx context.Context, prefix string, fn func(Object) error) error {
	return b.d.List(ctx, prefix, func(key string, size int64) error { return fn(Object{Key: key, Size: size}) })
}

func (b localBackend) listDir(ctx context.Context, prefix string, fn func(Object) error) error {
	return b.d.ListDir(ctx, prefix, func(key string, size int64, dir bool) error {
		return fn(Object{Key: key, Size: size, Dir: dir})
	})
}

func (b localBackend) stat(ctx context.Context, key string) (Object, bool, error) {
	size, ok, err := b.d.Stat(ctx, key)
	if !ok || err != nil {
		return Object{}, ok, err
	}
	return Object{Key: key, Size: size}, true, nil
}

func (b localBackend) read(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.d.Read(ctx, key)
}

// preflight writes the probe through the local writer; a local probe is
// always removed, so rep.Leftover stays nil.
func (b localBackend) preflight(ctx context.Context, _ string, rep *PreflightReport) error {
	var err error
	rep.CreateOnlyIgnored, err = b.d.Preflight(ctx, local.Probe{
		Key:  rep.Probe,
		Data: preflightData,
		WriteAgain: func(ctx context.Context) (bool, error) {
			return writeAgain(ctx, b, rep.Probe)
		},
		NamePrefix: preflightPrefix,
		StaleAfter: PreflightTimeout,
	})
	return err
}

func (b localBackend) removeAbandoned(ctx context.Context, prefix string, belongs func(string) bool) error {
	return b.d.RemoveAbandoned(ctx, prefix, belongs)
}

func (b localBackend) removeOwned(ctx context.Context, prefix string, owners []string) error {
	return b.d.RemoveOwned(ctx, prefix, owners)
}

func (b localBackend) close() error { return b.d.Close() }

// existsError is package local's error for a key that is taken, as
// storage's ErrExists.
type existsError struct{ error }

func (e existsError) Is(target error) bool { return target == ErrExists }
func (e existsError) Unwrap() error        { return e.error }

// localWriter is a local.Writer as an objectWriter.
type localWriter struct{ w *local.Writer }

func (w localWriter) Write(p []byte) (int, error) { return w.w.Write(p) }
func (w localWriter) commit() error {
	err := w.w.Commit()
	if errors.Is(err, fs.ErrExist) { // package local's word for a key that is taken
		return existsError{err}
	}
	return err
}
func (w localWriter) abort() { w.w.Abort() }

// commitHoldsNoPart tells the part queue that a local commit sends no
// part: it need not wait for one of the bucket's upload slots, which bound
// the part buffers handed to storage at once (local.Dir bounds its
// commits itself).
func (localWriter) commitHoldsNoPart() {}
