package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/spillway/spillway/internal/redact"
	"github.com/spillway/spillway/internal/storage/storeerr"
)

type remote struct {
	b *blob.Bucket
	// name is the bucket or container, for error messages: gocloud's errors
	// name the key but not the bucket, so "bucket does not exist" would
	// not say which. Open should set it to the URL's host.
	name     string
	partSize int
	retry    Retry // for the GCS writer's chunk retry deadline

	hookOnce sync.Once
	hook     func(func(any) bool) error
	// storageClass is the S3 storage class of new objects ("" = the
	// bucket's default).
	storageClass string
	// hide are the credentials storage.url carries (redact.Secrets): the
	// SDKs quote request URLs, whose user name comes from an endpoint=
	// parameter.
	hide []string
}

// beforeWrite returns the backend's hook that tunes a writer beyond what
// blob.WriterOptions reaches (see s3StreamingHook), or nil.
func (r *remote) beforeWrite() func(func(any) bool) error {
	r.hookOnce.Do(func() {
		r.hook = s3StreamingHook(r.b, int64(r.partSize), r.storageClass)
		if r.hook == nil {
			r.hook = gcsChunkHook(r.b, r.retry)
		}
	})
	return r.hook
}

// wrap adds the bucket name to a backend error, and turns an error no retry
// can fix (see storeerr.Classify) into a *storeerr.FatalError that says what to change.
func (r *remote) wrap(err error) error {
	if err == nil {
		return nil
	}
	if f := storeerr.Classify(err, r.name); f != nil {
		return r.hidden(f)
	}
	if r.name == "" {
		return r.hidden(err)
	}
	return r.hidden(fmt.Errorf("bucket %q: %w", r.name, err))
}

// hidden is err with the credentials of storage.url hidden in its text.
func (r *remote) hidden(err error) error {
	if len(r.hide) == 0 {
		return err
	}
	return hiddenError{err, r.hide}
}

// hiddenError hides strings in an error's text while keeping the error
// itself for errors.Is and errors.As.
type hiddenError struct {
	err  error
	hide []string
}

func (e hiddenError) Error() string {
	msg := e.err.Error()
	for _, v := range e.hide {
		msg = strings.ReplaceAll(msg, v, redact.Mark)
	}
	return msg
}

func (e hiddenError) Unwrap() error { return e.err }

func (r *remote) newWriter(ctx context.Context, key string, meta map[string]string, o writeOpts) (objectWriter, error) {
	replace := o.replace
	// Cancelling wctx is how gocloud aborts an upload.
	wctx, cancel := context.WithCancel(ctx)
	w, err := r.b.NewWriter(wctx, key, &blob.WriterOptions{
		BufferSize:                  r.partSize,
		MaxConcurrency:              1,
		Metadata:                    meta,
		ContentType:                 "application/octet-stream",
		DisableContentTypeDetection: true,
		BeforeWrite:                 r.beforeWrite(),
		// Create-only, like the local backend: a commit never replaces an
		// object. S3 sends If-None-Match: * (on PutObject or
		// CompleteMultipartUpload), GCS ifGenerationMatch=0, Azure
		// If-None-Match: * on the block list commit. versitygw v1.8.0,
		// fake-gcs-server v1.56.1 and Azurite 3.37.0 all enforce it, for
		// one-request and multipart uploads alike (TestEmulatorCreateOnly).
		// An S3-compatible store that ignores the header silently
		// overwrites; one that rejects it fails every commit.
		// replace is for objects meant to be overwritten (one per key).
		IfNotExist: !replace,
	})
	if err != nil {
		cancel()
		return nil, r.wrap(err)
	}
	return &remoteWriter{w: w, cancel: cancel, r: r}, nil
}

type remoteWriter struct {
	w      *blob.Writer
	cancel context.CancelFunc
	r      *remote
}

func (w *remoteWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	return n, w.r.wrap(err)
}

func (w *remoteWriter) commit() error {
	defer w.cancel()
	err := w.w.Close()
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		err = errors.Join(err, ErrExists)
	}
	return w.r.wrap(err)
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
			return r.wrap(err)
		}
		if o.IsDir {
			continue
		}
		if err := fn(Object{Key: o.Key, Size: o.Size}); err != nil {
			return err
		}
	}
}

func (r *remote) listDir(ctx context.Context, prefix string, fn func(Object) error) error {
	it := r.b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return r.wrap(err)
		}
		if err := fn(Object{Key: o.Key, Size: o.Size, Dir: o.IsDir}); err != nil {
			return err
		}
	}
}

func (r *remote) stat(ctx context.Context, key string) (Object, bool, error) {
	a, err := r.b.Attributes(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return Object{}, false, nil
	}
	if err != nil {
		return Object{}, false, r.wrap(err)
	}
	return Object{Key: key, Size: a.Size}, true, nil
}

func (r *remote) read(ctx context.Context, key string) (io.ReadCloser, error) {
	rd, err := r.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, r.wrap(err)
	}
	return rd, nil
}

// removeAbandoned has nothing to do: an unfinished remote upload is never
// visible, and is aborted or expires on its own.
func (r *remote) removeAbandoned(context.Context, string, func(string) bool) error { return nil }

// removeOwned has nothing to do, as removeAbandoned.
func (r *remote) removeOwned(context.Context, string, []string) error { return nil }

func (r *remote) close() error { return r.b.Close() }
