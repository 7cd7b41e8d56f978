// Package remote is storage's backend for object stores: any
// gocloud.dev/blob bucket (s3, gs, azblob, mem), opened with SDK clients
// that retry by Retry, written create-only, listed, read, and probed at
// startup (Preflight). Package storage puts its part queue, fault
// injection, metrics and error context on top; this package keeps the
// backend contract that storage's backend interface states, for the
// stores that gocloud reaches.
package remote

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

// Bucket is an opened object store. It is safe for concurrent use by many
// writers and readers; one Writer is used by one goroutine at a time.
type Bucket struct {
	b *blob.Bucket
	// name is the bucket or container, for error messages: gocloud's errors
	// name the key but not the bucket, so "bucket does not exist" would
	// not say which. Open sets it to the URL's host.
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
	// closeConns closes the connections of the bucket's own HTTP client;
	// nil for a bucket made by New.
	closeConns func()
}

// beforeWrite returns the backend's hook that tunes a writer beyond what
// blob.WriterOptions reaches (see s3StreamingHook), or nil.
func (r *Bucket) beforeWrite() func(func(any) bool) error {
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
func (r *Bucket) wrap(err error) error {
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
func (r *Bucket) hidden(err error) error {
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

// NewWriter starts an object under key. ctx bounds the whole upload:
// cancelling it ends the upload. A commit is create-only (ErrExists when
// key is taken) unless replace is set: then it replaces what is under key,
// as one atomic step.
func (r *Bucket) NewWriter(ctx context.Context, key string, meta map[string]string, replace bool) (*Writer, error) {
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
	return &Writer{w: w, cancel: cancel, r: r}, nil
}

// Writer is one object being written. After a Write error, only Abort
// may be called; Abort is not called after Commit.
type Writer struct {
	w      *blob.Writer
	cancel context.CancelFunc
	r      *Bucket
}

func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	return n, w.r.wrap(err)
}

// Commit completes the upload: when it returns nil the object is durable
// and whole. It ends the writer either way.
func (w *Writer) Commit() error {
	defer w.cancel()
	err := w.w.Close()
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		err = errors.Join(err, storeerr.ErrExists)
	}
	return w.r.wrap(err)
}

// Abort ends an uncommitted writer: nothing becomes visible under its key.
func (w *Writer) Abort() {
	w.cancel()
	_ = w.w.Close()
}

// List calls fn for the objects whose key starts with prefix, and stops
// at fn's first error, returning it.
func (r *Bucket) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
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
		if err := fn(o.Key, o.Size); err != nil {
			return err
		}
	}
}

// ListDir calls fn, in lexical order, for each name directly under
// prefix up to the next "/": dir is set for a directory level, whose key
// ends in "/".
func (r *Bucket) ListDir(ctx context.Context, prefix string, fn func(key string, size int64, dir bool) error) error {
	it := r.b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return r.wrap(err)
		}
		if err := fn(o.Key, o.Size, o.IsDir); err != nil {
			return err
		}
	}
}

// Stat returns the size of the object under key, ok=false when there is
// none.
func (r *Bucket) Stat(ctx context.Context, key string) (size int64, ok bool, err error) {
	a, err := r.b.Attributes(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, r.wrap(err)
	}
	return a.Size, true, nil
}

// Read opens a committed object.
func (r *Bucket) Read(ctx context.Context, key string) (io.ReadCloser, error) {
	rd, err := r.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, r.wrap(err)
	}
	return rd, nil
}

// Close releases the bucket, and closes its HTTP client's connections
// when the client is its own (see OpenBlob).
func (r *Bucket) Close() error {
	err := r.b.Close()
	if r.closeConns != nil {
		r.closeConns()
	}
	return err
}

// As exposes the SDK client beneath the bucket, as gocloud's blob.Bucket.As
// does: for tests and checks that need the store's own API.
func (r *Bucket) As(i any) bool { return r.b.As(i) }
