package storeerr

import (
	"context"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"google.golang.org/api/googleapi"
)

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
		fe = Classify(err, "")
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

// RetryClass names a retryable failure by its HTTP status, 0 when the
// request got no answer.
func RetryClass(status int) string {
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

// StatusOf finds the HTTP status in an SDK's error, 0 when there is none.
func StatusOf(err error) int {
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
