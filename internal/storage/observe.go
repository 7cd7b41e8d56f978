package storage

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"google.golang.org/api/googleapi"
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
	// ErrorClass of the error.
	Failed(backend, op, class string)
	// Retry reports a failed try that the SDK judged worth retrying;
	// class is throttled, server_error or network.
	Retry(backend, class string)
}

// ErrorClass names what kind of storage error err is, for metrics: one of
// the fatal kinds (missing_bucket, credentials, access_denied,
// wrong_region, bad_bucket_name), exists (a create-only write found the key
// taken: another writer), canceled, timeout, or other (transient, retried
// already). It is "" for nil.
func ErrorClass(err error) string {
	var fe *FatalError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrExists):
		return "exists"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &fe):
	default:
		fe = classify(err, "")
	}
	if fe == nil {
		return "other"
	}
	switch fe.Kind {
	case KindMissingBucket:
		return "missing_bucket"
	case KindCredentials:
		return "credentials"
	case KindAccessDenied:
		return "access_denied"
	case KindWrongRegion:
		return "wrong_region"
	case KindBadBucketName:
		return "bad_bucket_name"
	}
	return "other"
}

// retryClass names a retryable failure by its HTTP status, 0 when the
// request got no answer.
func retryClass(status int) string {
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return "throttled"
	case status >= 500:
		return "server_error"
	case status == 0:
		return "network"
	}
	return "other"
}

// statusOf finds the HTTP status in an SDK's error, 0 when there is none.
func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.HTTPStatusCode()
	}
	var ae *azcore.ResponseError
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
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
		b.obs.Failed(b.scheme, op, ErrorClass(err))
	}
}
