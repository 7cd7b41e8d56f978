package storage

import (
	"context"
	"errors"
	"io"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ErrExists is returned by Commit when an object already exists under the
// name and the backend enforces create-only writes.
var ErrExists = errors.New("object already exists")

type remote struct {
	b        *blob.Bucket
	partSize int
}

func (r *remote) newWriter(ctx context.Context, key string, meta map[string]string) (objectWriter, error) {
	// Cancelling wctx is how gocloud aborts an upload.
	wctx, cancel := context.WithCancel(ctx)
	w, err := r.b.NewWriter(wctx, key, &blob.WriterOptions{
		BufferSize:                  r.partSize,
		MaxConcurrency:              1,
		Metadata:                    meta,
		ContentType:                 "application/octet-stream",
		DisableContentTypeDetection: true,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return &remoteWriter{w: w, cancel: cancel}, nil
}

type remoteWriter struct {
	w      *blob.Writer
	cancel context.CancelFunc
}

func (w *remoteWriter) Write(p []byte) (int, error) { return w.w.Write(p) }

func (w *remoteWriter) commit() error {
	defer w.cancel()
	err := w.w.Close()
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return errors.Join(err, ErrExists)
	}
	return err
}

func (w *remoteWriter) abort() {
	w.cancel()
	_ = w.w.Close()
}

func (r *remote) list(ctx context.Context, prefix string, fn func(Object) error) error {
	it := r.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if o.IsDir {
			continue
		}
		if err := fn(Object{Key: o.Key, Size: o.Size}); err != nil {
			return err
		}
	}
}

func (r *remote) read(ctx context.Context, key string) (io.ReadCloser, error) {
	return r.b.NewReader(ctx, key, nil)
}

func (r *remote) close() error { return r.b.Close() }
