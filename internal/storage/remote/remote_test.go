package remote

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/spillway/spillway/internal/storage/storeerr"
)

// s3Err builds the error chain the AWS SDK returns for an S3 error answer
// (as storeerr's tests do).
func s3Err(status int, code string) error {
	re := &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
		Err:      &smithy.GenericAPIError{Code: code},
	}}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: re}
}

// TestRemoteWrap: remote.wrap makes classified errors fatal and names the
// bucket; others keep the bucket prefix and their text.
func TestRemoteWrap(t *testing.T) {
	r := &Bucket{name: "b1"}
	if err := r.wrap(s3Err(404, "NoSuchBucket")); !storeerr.IsFatal(err) || !strings.Contains(err.Error(), `bucket "b1" does not exist`) {
		t.Errorf("missing bucket: %v", err)
	}
	err := r.wrap(s3Err(503, "SlowDown"))
	if storeerr.IsFatal(err) || !strings.HasPrefix(err.Error(), `bucket "b1": `) {
		t.Errorf("slow down: %v", err)
	}
	if r.wrap(nil) != nil {
		t.Error("wrap(nil) != nil")
	}
}

func TestNoAWSCredentials(t *testing.T) {
	err := errors.New("operation error S3: ListObjectsV2, get identity: get credentials: failed to refresh cached credentials, no EC2 IMDS role found")
	detail, ok := noAWSCredentials(err)
	if !ok || detail != "failed to refresh cached credentials, no EC2 IMDS role found" {
		t.Fatalf("noAWSCredentials = %q, %v", detail, ok)
	}
	f := (&Bucket{name: "b"}).explain(err, "list objects")
	var fe *storeerr.FatalError
	if !errors.As(f, &fe) || fe.Kind != storeerr.KindCredentials || !strings.Contains(f.Error(), `no usable credentials were found for bucket "b"`) {
		t.Fatalf("explain = %v", f)
	}
}
