// Package storage writes finished files to a bucket: a local directory or
// any gocloud.dev/blob URL (s3, gs, azblob, mem).
//
// Its one promise is about durability: when Writer.Commit returns nil, the
// object is durable under its final name, and before that no object is
// visible under that name. The sink relies on this to decide which offsets
// may be committed.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	_ "gocloud.dev/blob/azureblob" // registers azblob://
	_ "gocloud.dev/blob/gcsblob"   // registers gs://
	_ "gocloud.dev/blob/memblob"   // registers mem://
	_ "gocloud.dev/blob/s3blob"    // registers s3://
)

// Options tunes how objects are uploaded.
type Options struct {
	// PartSize is the size of one upload request for remote stores. It is
	// also the unit of memory a remote writer holds.
	PartSize int64
	// UploadConcurrency bounds the parts being handed to storage at once,
	// across all writers of the bucket. Default 4.
	UploadConcurrency int
	// Account, when set, is told of every part buffer allocated (+bytes) and
	// freed (-bytes), so the byte budget sees data waiting for storage.
	Account func(delta int64)
	// Faults, when set, slow or stall the backend (tests, bench).
	Faults *Faults
	// Retry bounds the retries of remote storage requests; zero fields
	// take Retry's defaults.
	Retry Retry
}

// Object describes one stored object.
type Object struct {
	Key  string
	Size int64
}

// backend is what a scheme must provide. It is small on purpose: the local
// directory needs fsync semantics that gocloud's fileblob does not give.
type backend interface {
	newWriter(ctx context.Context, key string, meta map[string]string) (objectWriter, error)
	list(ctx context.Context, prefix string, fn func(Object) error) error
	read(ctx context.Context, key string) (io.ReadCloser, error)
	close() error
}

type objectWriter interface {
	io.Writer
	commit() error
	abort()
}

// Bucket is an opened storage location.
type Bucket struct {
	be       backend
	url      string // redacted, for messages
	writeMem int64
	partSize int
	uploads  chan struct{}
	account  func(int64)
	faults   *Faults
	pool     sync.Pool
}

// Open opens the bucket named by rawURL. file:// URLs are handled here with
// fsync; every other scheme goes through gocloud.dev/blob.
func Open(ctx context.Context, rawURL string, opts Options) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, secrets included: keep only why.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("storage: parse url %s: %w", Redact(rawURL), err)
	}
	if opts.PartSize <= 0 {
		opts.PartSize = defaultPartSize
	}
	if opts.UploadConcurrency <= 0 {
		opts.UploadConcurrency = 4
	}
	if opts.Account == nil {
		opts.Account = func(int64) {}
	}
	// The queue's chunks are smaller than a remote part: the backend's writer
	// gathers them into parts of PartSize (counted in WriterMemory), and
	// small chunks keep each open file's step in memory small, so the budget
	// is never overshot by a file's first write.
	b := &Bucket{partSize: int(FootprintOf(u.Scheme, opts.PartSize).Chunk), uploads: make(chan struct{}, opts.UploadConcurrency), account: opts.Account, faults: opts.Faults}
	if u.Scheme == "file" {
		dir := u.Path
		if dir == "" {
			return nil, fmt.Errorf("storage: file url %q has no path", rawURL)
		}
		be, err := openLocal(dir)
		if err != nil {
			return nil, err
		}
		// A local file needs no big parts: they only batch write syscalls.
		b.be, b.url = be, rawURL
		return b, nil
	}
	// storage_class is ours, not gocloud's (whose opener refuses unknown
	// parameters): take it out before gocloud sees the URL.
	var storageClass string
	if u.Scheme == "s3" && u.Query().Has(StorageClassParam) {
		q := u.Query()
		storageClass = q.Get(StorageClassParam)
		if err := CheckStorageClass(storageClass); err != nil {
			return nil, fmt.Errorf("storage: %s: %w", Redact(rawURL), err)
		}
		q.Del(StorageClassParam)
		u.RawQuery = q.Encode()
		rawURL = u.String()
	}
	bb, err := openRemote(ctx, u, rawURL, opts.Retry)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", Redact(rawURL), redactedError{err, rawURL})
	}
	b.be, b.url, b.writeMem = &remote{b: bb, name: u.Host, partSize: int(opts.PartSize), retry: opts.Retry.withDefaults(), storageClass: storageClass}, Redact(rawURL), FootprintOf(u.Scheme, opts.PartSize).Writer
	return b, nil
}

// Footprint is the memory storage holds for a bucket's writers, for the
// budget, and for `config check`, which must not open the bucket.
type Footprint struct {
	// Writer is what one open writer holds of its own, beyond the chunks of
	// its part queue (Bucket.WriterMemory).
	Writer int64
	// Chunk is the unit of a part queue (Bucket.PartSize).
	Chunk int64
	// Upload is what one upload in flight holds: a part.
	Upload int64
}

// FootprintOf is the Footprint of a bucket of the URL scheme with parts of
// partSize bytes (0: the default).
func FootprintOf(scheme string, partSize int64) Footprint {
	if partSize <= 0 {
		partSize = defaultPartSize
	}
	chunk := min(partSize, chunkSize)
	switch scheme {
	case "file":
		// A local writer holds nothing of its own: chunks go straight to
		// write calls.
		return Footprint{Chunk: chunk, Upload: chunk}
	case "s3":
		// Besides our part queue, the transfer manager holds its first
		// part and a pool of two, briefly four, and 5.1 was measured once
		// under CI load (TestEmulatorWriterMemory): count five.
		return Footprint{Writer: 5 * partSize, Chunk: chunk, Upload: partSize}
	}
	// A gocloud writer buffers one part of its own on GCS and Azure.
	return Footprint{Writer: partSize, Chunk: chunk, Upload: partSize}
}

const defaultPartSize = 8 << 20

// WriterMemory is the memory one open Writer holds beyond the part buffers
// reported to Options.Account, for the budget.
func (b *Bucket) WriterMemory() int64 { return b.writeMem }

// PartSize is the size of one chunk of the part queue. An open writer holds
// one while it fills, and more while storage is behind, all reported to
// Options.Account.
func (b *Bucket) PartSize() int64 { return int64(b.partSize) }

// String returns the bucket URL with credentials removed.
func (b *Bucket) String() string { return b.url }

// NewWriter starts an object. Nothing is visible under key until Commit
// returns nil. ctx bounds the whole upload.
func (b *Bucket) NewWriter(ctx context.Context, key string, meta map[string]string) (*Writer, error) {
	w, err := b.be.newWriter(ctx, key, meta)
	if err != nil {
		return nil, fmt.Errorf("storage: start %s: %w", key, err)
	}
	if b.faults != nil {
		w = faultyWriter{w, b.faults, key, ctx}
	}
	return &Writer{w: newPartQueue(w, b.partSize, b.uploads, b.account, &b.pool), key: key}, nil
}

// List calls fn for every object whose key starts with prefix.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(Object) error) error {
	if err := b.be.list(ctx, prefix, fn); err != nil {
		return fmt.Errorf("storage: list %q: %w", prefix, err)
	}
	return nil
}

// RemoveAbandoned deletes what a writer that died mid-write left under
// prefix, for the keys that belongs accepts: temp files of a local
// directory. (Object stores keep nothing visible; their incomplete uploads
// are aborted, or expire by a lifecycle rule.) Call it only for partitions
// this process owns, before writing to them.
func (b *Bucket) RemoveAbandoned(ctx context.Context, prefix string, belongs func(key string) bool) error {
	l, ok := b.be.(*local)
	if !ok {
		return nil
	}
	if err := l.removeTemps(ctx, prefix, belongs); err != nil {
		return fmt.Errorf("storage: remove abandoned temp files under %q: %w", prefix, err)
	}
	return nil
}

// Read opens an object for reading.
func (b *Bucket) Read(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := b.be.read(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", key, err)
	}
	return r, nil
}

// Close releases the bucket.
func (b *Bucket) Close() error { return b.be.close() }

// Writer streams one object. It is not safe for concurrent use.
type Writer struct {
	w    *partQueue
	key  string
	n    int64
	done bool
}

// Write appends p to the object.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("storage: write %s: %w", w.key, err)
	}
	return n, nil
}

// Written is the number of bytes written so far.
func (w *Writer) Written() int64 { return w.n }

// WaitQueued blocks until at most max bytes written to w wait in its queue
// for storage, or the upload failed (the next Write or Commit says how), or
// ctx ends. Write never waits: a caller that must not let the queue grow
// (a record larger than the budget's room) waits here between pieces.
func (w *Writer) WaitQueued(ctx context.Context, max int64) error {
	if err := w.w.waitQueued(ctx, int(max)); err != nil {
		return fmt.Errorf("storage: write %s: %w", w.key, err)
	}
	return nil
}

// Key is the object's final name.
func (w *Writer) Key() string { return w.key }

// Commit finishes the upload. When it returns nil the object is durable.
func (w *Writer) Commit() error {
	if w.done {
		return errors.New("storage: writer already finished")
	}
	w.done = true
	if err := w.w.commit(); err != nil {
		return fmt.Errorf("storage: commit %s: %w", w.key, err)
	}
	return nil
}

// Abort discards the object; nothing stays visible under its name.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.w.abort()
}

// redactedError hides a URL's secrets in an error's text while keeping the
// error itself for errors.Is and errors.As.
type redactedError struct {
	err error
	raw string
}

func (e redactedError) Error() string {
	msg := strings.ReplaceAll(e.err.Error(), e.raw, Redact(e.raw))
	if u, err := url.Parse(e.raw); err == nil {
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= 4 && Redact(e.raw) != e.raw && !strings.Contains(Redact(e.raw), v) {
					msg = strings.ReplaceAll(msg, v, "REDACTED")
				}
			}
		}
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "REDACTED")
		}
	}
	return msg
}

func (e redactedError) Unwrap() error { return e.err }

// Redact removes credentials from a storage URL so it can be logged.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable url>"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	q := u.Query()
	changed := false
	for k := range q {
		lk := strings.ToLower(k)
		for _, s := range []string{"secret", "key", "token", "sig", "password", "credential"} {
			if strings.Contains(lk, s) {
				q.Set(k, "REDACTED")
				changed = true
			}
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}
