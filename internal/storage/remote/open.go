package remote

import (
	"context"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers azblob://
	_ "gocloud.dev/blob/gcsblob"   // registers gs://
	_ "gocloud.dev/blob/memblob"   // registers mem://
	_ "gocloud.dev/blob/s3blob"    // registers s3://

	"github.com/spillway/spillway/internal/redact"
)

// Options are how Open opens a bucket.
type Options struct {
	// PartSize is the size of one upload request, and of the buffer a
	// writer holds.
	PartSize int
	// Retry bounds the retries of each request; zero fields take Retry's
	// defaults.
	Retry Retry
	// OnRetry, when set, is told of each failed try the SDK retries, by
	// storeerr.RetryClass.
	OnRetry func(class string)
	// StorageClass is the S3 storage class of new objects ("" = the
	// bucket's default), checked by CheckStorageClass.
	StorageClass string
	// Getenv, when set, is read instead of the process environment for
	// the settings a store's client takes from it: the GCS emulator host
	// (STORAGE_EMULATOR_HOST) and Azure's credentials. Tests that run
	// stores behind different endpoints at once give each its own.
	Getenv func(string) string
}

// Open opens the bucket that u (parsed from rawURL, which holds no
// storage_class parameter) names. Its error quotes no secret of rawURL.
func Open(ctx context.Context, u *url.URL, rawURL string, o Options) (*Bucket, error) {
	retry := o.Retry
	retry.onRetry = o.OnRetry
	retry.getenv = o.Getenv
	bb, closeConns, err := OpenBlob(ctx, u, rawURL, retry)
	if err != nil {
		return nil, redactedError{err, rawURL}
	}
	r := New(bb, u.Host, o)
	r.hide = redact.Secrets(rawURL)
	r.closeConns = closeConns
	return r, nil
}

// New makes a Bucket of an opened gocloud bucket named name, as Open
// does after opening it.
func New(b *blob.Bucket, name string, o Options) *Bucket {
	o.Retry.onRetry = o.OnRetry
	return &Bucket{b: b, name: name, partSize: o.PartSize, retry: o.Retry.withDefaults(), storageClass: o.StorageClass}
}

// redactedError hides a URL's secrets in an error's text while keeping the
// error itself for errors.Is and errors.As.
type redactedError struct {
	err error
	raw string
}

func (e redactedError) Error() string {
	shown := redact.URL(e.raw)
	msg := strings.ReplaceAll(e.err.Error(), e.raw, shown)
	if u, err := url.Parse(e.raw); err == nil && shown != e.raw {
		// The SDK may quote a part of the URL alone: hide each value that
		// redact.URL hid (short ones would match unrelated text).
		// The credentials first, so that a URL in a parameter (S3's
		// endpoint) keeps its host.
		hidden := redact.Secrets(e.raw)
		for _, vs := range u.Query() {
			hidden = append(hidden, vs...)
		}
		for _, v := range hidden {
			if len(v) >= 4 && !strings.Contains(shown, v) {
				msg = strings.ReplaceAll(msg, v, redact.Mark)
			}
		}
	}
	return msg
}

func (e redactedError) Unwrap() error { return e.err }
