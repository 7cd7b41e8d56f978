// Package storage writes finished files to a bucket: a local directory or
// any gocloud.dev/blob URL (s3, gs, azblob, mem).
//
// Its one promise is about durability: when Writer.Commit returns nil, the
// object is durable under its final name, and before that no object is
// visible under that name. The sink relies on this to decide which offsets
// may be committed.
//
// The backends are storage/local (a directory, with fsync) and
// storage/remote (gocloud); the part queue is storage/partqueue, and what
// an error means storage/storeerr.
package storage

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"sync"
	"time"

	_ "gocloud.dev/blob/azureblob" // registers azblob://
	_ "gocloud.dev/blob/gcsblob"   // registers gs://
	_ "gocloud.dev/blob/memblob"   // registers mem://
	_ "gocloud.dev/blob/s3blob"    // registers s3://

	"github.com/spillway/spillway/internal/redact"
	"github.com/spillway/spillway/internal/storage/local"
	"github.com/spillway/spillway/internal/storage/partqueue"
	"github.com/spillway/spillway/internal/storage/remote"
	"github.com/spillway/spillway/internal/storage/storeerr"
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
	// Faults, when set, slow or stall the backend (tests).
	Faults *Faults
	// Retry bounds the retries of remote storage requests; zero fields
	// take Retry's defaults.
	Retry Retry
	// Observer, when set, is told of requests and retries (metrics).
	Observer Observer
	// Getenv, when set, replaces the process environment for the
	// settings remote stores' clients read from it (remote.Options.Getenv).
	Getenv func(string) string
}

// ErrExists is returned by Commit when an object already exists under the
// name and the backend enforces create-only writes.
var ErrExists = storeerr.ErrExists

// Retry bounds how one remote storage request is retried: see
// remote.Retry.
type Retry = remote.Retry

// Object describes one stored object.
type Object struct {
	Key  string
	Size int64
	Dir  bool // a directory level of ListDir, not an object
}

// backend is what a scheme must provide: local (a directory, with the
// fsync semantics gocloud's fileblob does not give) and remote (any
// gocloud bucket). Bucket adds the part queue, fault injection and error
// context on top; everything it asks of a backend goes through these
// methods.
//
// The contract, which the sink's offset commits rest on:
//
//   - Create-only. Nothing is ever replaced: a commit to a key that
//     already names an object fails with an error for which
//     errors.Is(err, ErrExists) holds, and the object there is left as it
//     was, so of two writers of one key at most one commit succeeds. The
//     remote backend relies on the store honouring conditional writes
//     (see remote.Bucket.NewWriter).
//   - Nothing written is visible under its key (to list or read) before
//     commit is called; once commit returns nil, the object is durable
//     and whole.
//   - A failed commit proves nothing about the key: the object may be
//     visible all the same (the store committed it and the answer was
//     lost; the local file was linked but its directory not synced). The
//     caller must stop trusting its own view and resume from what list
//     and read show. Apart from that, a failed commit leaves nothing
//     visible. It
//     ends the writer either way: its resources are released, and what it
//     started in the store is cleaned up or left to expire (an S3
//     multipart upload is aborted; an uncommitted Azure block list or GCS
//     resumable session expires on its own; a local temp file is
//     removed). abort is not called after commit.
//   - abort ends an uncommitted writer, also after a failed Write: nothing
//     becomes visible under its key, and it cleans up as a failed commit
//     does. It can't fail, and waits for the store no longer than the
//     clean-up's own bound (s3AbortTimeout for an S3 multipart upload).
//   - list calls fn for the visible objects whose key starts with prefix,
//     at most once each and in no promised order (callers that need one
//     sort), and stops at fn's first error, returning it. Objects
//     committed while it runs may or may not be seen. Writes in progress
//     (the local backend's temp files) are never shown.
//   - The remote backend returns errors no retry can fix (a missing
//     bucket, refused credentials, a denied permission) as a *storeerr.FatalError
//     (see storeerr.Classify); the local backend returns the OS's errors.
//   - A backend is safe for concurrent use by many writers and readers.
//     One objectWriter is used by one goroutine at a time.
type backend interface {
	// newWriter starts an object under key. ctx bounds the whole upload:
	// cancelling it ends a remote upload (the local backend, whose calls
	// don't wait on a network, ignores it).
	//
	// A commit is create-only (ErrExists when key is taken) unless replace
	// is set: then it replaces what is under key, as one atomic step, and
	// readers see either the old object or the new one, never a mix.
	//
	// A non-empty owner names who writes key, for removeOwned.
	newWriter(ctx context.Context, key string, meta map[string]string, o writeOpts) (objectWriter, error)
	list(ctx context.Context, prefix string, fn func(Object) error) error
	// listDir calls fn, in lexical order, for each name directly under
	// prefix up to the next "/": a file (Object.Key the full key) or a
	// directory (Object.Key the full key ending in "/", Object.Dir set).
	listDir(ctx context.Context, prefix string, fn func(Object) error) error
	// stat returns the object under key, ok=false when there is none.
	stat(ctx context.Context, key string) (o Object, ok bool, err error)
	// read opens a committed object.
	read(ctx context.Context, key string) (io.ReadCloser, error)
	// preflight checks, under prefix, what Spillway will ask of the store
	// (see Bucket.Preflight), using rep.Probe as a throw-away key, and
	// fills in rep: a probe it could write but not delete is reported as
	// rep.Leftover, not an error.
	preflight(ctx context.Context, prefix string, rep *PreflightReport) error
	// removeAbandoned deletes the leftovers of writers that died mid-write
	// under prefix (the local backend's temp files), for the final keys
	// belongs accepts, never those of writes this process still has open.
	// The remote backend has none: an unfinished upload is never visible.
	removeAbandoned(ctx context.Context, prefix string, belongs func(key string) bool) error
	// removeOwned deletes the leftovers, under prefix, of writes made for
	// one of owners (see Bucket.ReplaceOwned), never those of writes this
	// process still has open.
	removeOwned(ctx context.Context, prefix string, owners []string) error
	close() error
}

// objectWriter is one object being written; see backend for its contract.
// Write sends the object's bytes in order and may block on the store; it
// does not keep p after it returns. After a Write error, only abort may be
// called.
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
	// chunkSize is the part queue's unit: see ChunkSize.
	chunkSize int
	uploads   chan struct{}
	account   func(int64)
	faults    *Faults
	pool      sync.Pool
	// scheme names the backend in what obs is told.
	scheme string
	obs    Observer
}

// Open opens the bucket named by rawURL. file:// URLs go to storage/local,
// with fsync; every other scheme goes through gocloud.dev/blob.
func Open(ctx context.Context, rawURL string, opts Options) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, secrets included: keep only why.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("storage: parse url %s: %w", redact.URL(rawURL), err)
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
	b := &Bucket{chunkSize: int(FootprintOf(u.Scheme, opts.PartSize).Chunk), uploads: make(chan struct{}, opts.UploadConcurrency), account: opts.Account, faults: opts.Faults,
		scheme: u.Scheme, obs: opts.Observer}
	if u.Scheme == "file" {
		dir := u.Path
		if dir == "" {
			return nil, fmt.Errorf("storage: file url %q has no path", rawURL)
		}
		d, err := local.Open(dir)
		if err != nil {
			return nil, err
		}
		// A local file needs no big parts: they only batch write syscalls.
		b.be, b.url = localBackend{d}, rawURL
		return b, nil
	}
	// storage_class is ours, not gocloud's (whose opener refuses unknown
	// parameters): take it out before gocloud sees the URL.
	var storageClass string
	if u.Scheme == "s3" && u.Query().Has(remote.StorageClassParam) {
		q := u.Query()
		storageClass = q.Get(remote.StorageClassParam)
		if err := remote.CheckStorageClass(storageClass); err != nil {
			return nil, fmt.Errorf("storage: %s: %w", redact.URL(rawURL), err)
		}
		q.Del(remote.StorageClassParam)
		u.RawQuery = q.Encode()
		rawURL = u.String()
	}
	var onRetry func(string)
	if obs := opts.Observer; obs != nil {
		onRetry = func(class string) { obs.Retry(u.Scheme, class) }
	}
	rb, err := remote.Open(ctx, u, rawURL, remote.Options{PartSize: int(opts.PartSize), Retry: opts.Retry, OnRetry: onRetry, StorageClass: storageClass, Getenv: opts.Getenv})
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", redact.URL(rawURL), err)
	}
	b.be, b.url, b.writeMem = remoteBackend{rb}, redact.URL(rawURL), FootprintOf(u.Scheme, opts.PartSize).Writer
	return b, nil
}

// Footprint is the memory storage holds for a bucket's writers, for the
// budget, and for `config check`, which must not open the bucket.
type Footprint struct {
	// Writer is what one open writer holds of its own, beyond the chunks of
	// its part queue (Bucket.WriterMemory).
	Writer int64
	// Chunk is the unit of a part queue (Bucket.ChunkSize).
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

// chunkSize is the unit of the part queue: big enough to turn encoder
// writes into few syscalls, small enough that many open files stay cheap.
const chunkSize = 256 << 10

// WriterMemory is the memory one open Writer holds beyond the part buffers
// reported to Options.Account, for the budget.
func (b *Bucket) WriterMemory() int64 { return b.writeMem }

// ChunkSize is the size of one chunk of the part queue (256 KiB, or the
// part size when smaller), not of a remote upload part. An open writer
// holds one while it fills, and more while storage is behind, all reported
// to Options.Account.
func (b *Bucket) ChunkSize() int64 { return int64(b.chunkSize) }

// String returns the bucket URL with credentials removed.
func (b *Bucket) String() string { return b.url }

// NewWriter starts an object. Nothing is visible under key until Commit
// returns nil. ctx bounds the whole upload.
func (b *Bucket) NewWriter(ctx context.Context, key string, meta map[string]string) (*Writer, error) {
	return b.newWriter(ctx, key, meta, writeOpts{})
}

// writeOpts are a write's options besides its key and metadata.
type writeOpts struct {
	// replace: the commit replaces what is under the key, instead of
	// failing with ErrExists.
	replace bool
	// owner names who writes (ReplaceOwned); "" for none.
	owner string
}

func (b *Bucket) newWriter(ctx context.Context, key string, meta map[string]string, o writeOpts) (*Writer, error) {
	w, err := b.be.newWriter(ctx, key, meta, o)
	if err != nil {
		return nil, fmt.Errorf("storage: start %s: %w", key, err)
	}
	if b.faults != nil {
		w = faultyWriter{w, b.faults, key, ctx}
	}
	return &Writer{w: partqueue.New(queueDst(w), b.chunkSize, b.uploads, b.account, &b.pool), key: key, b: b}, nil
}

// List calls fn for every object whose key starts with prefix.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(Object) error) error {
	start := time.Now()
	err := b.be.list(ctx, prefix, fn)
	b.observe("list", start, err)
	if err != nil {
		return fmt.Errorf("storage: list %q: %w", prefix, err)
	}
	return nil
}

// ListDir calls fn, in lexical order, for each object and directory level
// directly under prefix, as a listing with delimiter "/" gives them. Its
// cost depends on how many names sit at that level, not on how many objects
// lie below them.
func (b *Bucket) ListDir(ctx context.Context, prefix string, fn func(Object) error) error {
	start := time.Now()
	err := b.be.listDir(ctx, prefix, fn)
	b.observe("list", start, err)
	if err != nil {
		return fmt.Errorf("storage: list %q: %w", prefix, err)
	}
	return nil
}

// Stat returns the object stored under key; ok is false when there is none.
func (b *Bucket) Stat(ctx context.Context, key string) (Object, bool, error) {
	start := time.Now()
	o, ok, err := b.be.stat(ctx, key)
	b.observe("stat", start, err)
	if err != nil {
		return Object{}, false, fmt.Errorf("storage: stat %s: %w", key, err)
	}
	return o, ok, nil
}

// Put stores a small object create-only, durably: ErrExists when the key is
// taken.
func (b *Bucket) Put(ctx context.Context, key string, data []byte, meta map[string]string) error {
	return b.put(ctx, key, data, meta, writeOpts{})
}

func (b *Bucket) put(ctx context.Context, key string, data []byte, meta map[string]string, o writeOpts) error {
	w, err := b.newWriter(ctx, key, meta, o)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

// Replace stores a small object durably under key, replacing any object
// there in one atomic step. It is the one write that is not create-only:
// for layouts whose objects are meant to be overwritten (one object per
// record key), where writing the same object again is harmless.
func (b *Bucket) Replace(ctx context.Context, key string, data []byte, meta map[string]string) error {
	return b.put(ctx, key, data, meta, writeOpts{replace: true})
}

// ReplaceOwned is Replace for a key whose name doesn't say who writes it
// (one object per record key, from any partition): owner does, such as
// "topic/partition". A local directory's temp file carries it, so that
// the next owner can remove what a writer that died mid-write left, with
// RemoveAbandonedOwned.
func (b *Bucket) ReplaceOwned(ctx context.Context, key, owner string, data []byte, meta map[string]string) error {
	return b.put(ctx, key, data, meta, writeOpts{replace: true, owner: owner})
}

// RemoveAbandoned deletes what a writer that died mid-write left under
// prefix, for the keys that belongs accepts: temp files of a local
// directory. (Object stores keep nothing visible; their incomplete uploads
// are aborted, or expire by a lifecycle rule.) Call it only for partitions
// this process owns, before writing to them.
func (b *Bucket) RemoveAbandoned(ctx context.Context, prefix string, belongs func(key string) bool) error {
	if err := b.be.removeAbandoned(ctx, prefix, belongs); err != nil {
		return fmt.Errorf("storage: remove abandoned temp files under %q: %w", prefix, err)
	}
	return nil
}

// NewReplacingWriter starts an object that replaces what is under key at
// Commit, as ReplaceOwned stores it, streamed.
func (b *Bucket) NewReplacingWriter(ctx context.Context, key, owner string, meta map[string]string) (*Writer, error) {
	return b.newWriter(ctx, key, meta, writeOpts{replace: true, owner: owner})
}

// RemoveAbandonedOwned deletes what writers that died mid-write left
// under prefix, for the owners given to ReplaceOwned: temp files of a
// local directory. Call it only for owners (partitions) this process owns
// now, before writing for them: a paused former owner's write in flight
// is lost, as with RemoveAbandoned.
func (b *Bucket) RemoveAbandonedOwned(ctx context.Context, prefix string, owners []string) error {
	if len(owners) == 0 {
		return nil
	}
	if err := b.be.removeOwned(ctx, prefix, owners); err != nil {
		return fmt.Errorf("storage: remove abandoned temp files of %q under %q: %w", owners, prefix, err)
	}
	return nil
}

// Read opens an object for reading.
func (b *Bucket) Read(ctx context.Context, key string) (io.ReadCloser, error) {
	start := time.Now()
	r, err := b.be.read(ctx, key)
	b.observe("read", start, err)
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", key, err)
	}
	return r, nil
}

// Close releases the bucket.
func (b *Bucket) Close() error { return b.be.close() }

// Writer streams one object. It is not safe for concurrent use.
type Writer struct {
	w    *partqueue.Queue
	key  string
	n    int64
	crc  uint32
	done bool
	b    *Bucket
}

// castagnoli is the CRC-32C table: the checksum S3 and GCS offer natively,
// and one the CPU computes (SSE4.2, ARMv8 CRC) far faster than any store
// takes bytes.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Write appends p to the object.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	w.crc = crc32.Update(w.crc, castagnoli, p[:n])
	if err != nil {
		w.b.failed("write", err)
		return n, fmt.Errorf("storage: write %s: %w", w.key, err)
	}
	return n, nil
}

// Written is the number of bytes written so far.
func (w *Writer) Written() int64 { return w.n }

// CRC32C is the CRC-32C (Castagnoli) of the bytes written so far: once
// they are all written, of the object Commit will publish. It is computed
// here, as the bytes pass, so that every backend has it (the local one
// too), and it is known before Commit, while nothing is visible yet.
func (w *Writer) CRC32C() uint32 { return w.crc }

// WaitQueued blocks until at most max bytes written to w wait in its queue
// for storage, or the upload failed (the next Write or Commit says how), or
// ctx ends. Write never waits: a caller that must not let the queue grow
// (a record larger than the budget's room) waits here between pieces.
func (w *Writer) WaitQueued(ctx context.Context, max int64) error {
	if err := w.w.WaitQueued(ctx, int(max)); err != nil {
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
	start := time.Now()
	err := w.w.Commit()
	w.b.observe("commit", start, err)
	if err != nil {
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
	w.w.Abort()
}
