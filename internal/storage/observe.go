package storage

import (
	"time"

	"github.com/spillway/spillway/internal/storage/storeerr"
)

// Observer is told of storage requests, for metrics. Its methods are called
// from upload goroutines and SDK retry loops: they must be cheap and must
// not block.
type Observer interface {
	// Request reports how long one call of the bucket took, failed or
	// not: op is commit (the end of an upload: waiting for its last parts
	// and completing it), list, stat or read.
	Request(backend, op string, d time.Duration)
	// Failed reports a call that failed, after the SDK's retries: op is
	// one of Request's, or write (streaming an upload's bytes); class is
	// storeerr.ErrorClass of the error.
	Failed(backend, op, class string)
	// Retry reports a failed try that the SDK judged worth retrying;
	// class is throttled, server_error or network.
	Retry(backend, class string)
}

func (b *Bucket) observe(op string, start time.Time, err error) {
	if b.obs == nil {
		return
	}
	b.obs.Request(b.scheme, op, time.Since(start))
	b.failed(op, err)
}

func (b *Bucket) failed(op string, err error) {
	if b.obs != nil && err != nil {
		b.obs.Failed(b.scheme, op, storeerr.ErrorClass(err))
	}
}
