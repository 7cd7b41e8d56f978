package storage

import (
	"context"
	"io"

	"github.com/spillway/spillway/internal/storage/remote"
)

// remoteBackend is the backend of every scheme but file: package remote,
// behind the backend interface.
type remoteBackend struct{ r *remote.Bucket }

func (b remoteBackend) newWriter(ctx context.Context, key string, meta map[string]string, o writeOpts) (objectWriter, error) {
	w, err := b.r.NewWriter(ctx, key, meta, o.replace)
	if err != nil {
		return nil, err
	}
	return remoteWriter{w}, nil
}

func (b remoteBackend) list(ctx context.Context, prefix string, fn func(Object) error) error {
	return b.r.List(ctx, prefix, func(key string, size int64) error { return fn(Object{Key: key, Size: size}) })
}

func (b remoteBackend) listDir(ctx context.Context, prefix string, fn func(Object) error) error {
	return b.r.ListDir(ctx, prefix, func(key string, size int64, dir bool) error {
		return fn(Object{Key: key, Size: size, Dir: dir})
	})
}

func (b remoteBackend) stat(ctx context.Context, key string) (Object, bool, error) {
	size, ok, err := b.r.Stat(ctx, key)
	if !ok || err != nil {
		return Object{}, ok, err
	}
	return Object{Key: key, Size: size}, true, nil
}

func (b remoteBackend) read(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.r.Read(ctx, key)
}

func (b remoteBackend) preflight(ctx context.Context, prefix string, rep *PreflightReport) error {
	got, err := b.r.Preflight(ctx, prefix, rep.Probe, func(ctx context.Context) (bool, error) {
		return writeAgain(ctx, b, rep.Probe)
	})
	rep.Leftover, rep.CreateOnlyIgnored, rep.ignoredBy = got.Leftover, got.CreateOnlyIgnored, got.IgnoredBy
	return err
}

// removeAbandoned has nothing to do: an unfinished remote upload is never
// visible, and is aborted or expires on its own.
func (remoteBackend) removeAbandoned(context.Context, string, func(string) bool) error { return nil }

// removeOwned has nothing to do, as removeAbandoned.
func (remoteBackend) removeOwned(context.Context, string, []string) error { return nil }

func (b remoteBackend) close() error { return b.r.Close() }

// remoteWriter is a remote.Writer as an objectWriter.
type remoteWriter struct{ w *remote.Writer }

func (w remoteWriter) Write(p []byte) (int, error) { return w.w.Write(p) }
func (w remoteWriter) commit() error               { return w.w.Commit() }
func (w remoteWriter) abort()                      { w.w.Abort() }
