package storeerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	gcs "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"google.golang.org/api/googleapi"
)

// s3Err builds the error chain the AWS SDK returns for an S3 error answer.
func s3Err(status int, code, msg string, header http.Header) error {
	var apiErr error
	if code != "" {
		apiErr = &smithy.GenericAPIError{Code: code, Message: msg}
	}
	if header == nil {
		header = http.Header{}
	}
	re := &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: header}},
		Err:      apiErr,
	}}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: re}
}

func azureErr(status int, code string) error {
	return fmt.Errorf("PUT http://127.0.0.1:10000/acct/c/k: %w", &azcore.ResponseError{ErrorCode: code, StatusCode: status})
}

func TestClassify(t *testing.T) {
	const bucket = "my-bucket"
	for _, tc := range []struct {
		name   string
		err    error
		kind   Kind // 0: not fatal
		region string
		want   []string // in the message
	}{
		{"s3 missing bucket", s3Err(404, "NoSuchBucket", "The specified bucket does not exist", nil), KindMissingBucket, "",
			[]string{`bucket "my-bucket" does not exist (Spillway never creates buckets: create it, or fix storage.url): NoSuchBucket`}},
		{"s3 unknown key", s3Err(403, "InvalidAccessKeyId", "", nil), KindCredentials, "",
			[]string{`the credentials were refused by bucket "my-bucket" (check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role): InvalidAccessKeyId`}},
		{"s3 wrong secret", s3Err(403, "SignatureDoesNotMatch", "", nil), KindCredentials, "", []string{"SignatureDoesNotMatch", "AWS_SECRET_ACCESS_KEY"}},
		{"versitygw unknown key", s3Err(404, "XAdminUserNotFound", "", nil), KindCredentials, "", []string{"XAdminUserNotFound"}},
		{"s3 access denied", s3Err(403, "AccessDenied", "Access Denied", nil), KindAccessDenied, "",
			[]string{`access to bucket "my-bucket" was denied`, "docs/storage.md", "AccessDenied"}},
		{"s3 redirect with region header", s3Err(301, "PermanentRedirect", "", http.Header{"X-Amz-Bucket-Region": {"eu-west-1"}}), KindWrongRegion, "eu-west-1",
			[]string{`bucket "my-bucket" is in region eu-west-1`, "set region=eu-west-1 in storage.url", "PermanentRedirect"}},
		{"s3 bare 301 on HEAD", s3Err(301, "", "", http.Header{"X-Amz-Bucket-Region": {"ap-south-1"}}), KindWrongRegion, "ap-south-1",
			[]string{"set region=ap-south-1", "HTTP 301"}},
		{"s3 signature scope, AWS quoting", s3Err(400, "AuthorizationHeaderMalformed",
			"The authorization header is malformed; the region 'us-east-1' is wrong; expecting 'eu-central-1'", nil), KindWrongRegion, "eu-central-1",
			[]string{"set region=eu-central-1"}},
		{"s3 signature scope, versitygw quoting", s3Err(400, "AuthorizationHeaderMalformed",
			`The authorization header is malformed; the region "eu-west-1" is wrong; expecting "us-east-1"`, nil), KindWrongRegion, "us-east-1", nil},
		{"s3 redirect, region unknown", s3Err(301, "PermanentRedirect", "", nil), KindWrongRegion, "", []string{"fix region= in storage.url"}},
		{"s3 malformed header, not the region", s3Err(400, "AuthorizationHeaderMalformed", "The authorization header is malformed", nil), KindCredentials, "", nil},
		{"s3 bad bucket name", s3Err(400, "InvalidBucketName", "", nil), KindBadBucketName, "", []string{"is not a valid bucket name"}},
		{"s3 missing key", s3Err(404, "NoSuchKey", "", nil), 0, "", nil},
		{"s3 HEAD missing key", s3Err(404, "NotFound", "", nil), 0, "", nil},
		{"s3 precondition", s3Err(412, "PreconditionFailed", "", nil), 0, "", nil},
		{"s3 slow down", s3Err(503, "SlowDown", "", nil), 0, "", nil},
		{"s3 internal error", s3Err(500, "InternalError", "", nil), 0, "", nil},
		{"s3 clock skew", s3Err(403, "RequestTimeTooSkewed", "", nil), 0, "", nil},

		{"azure missing container", azureErr(404, "ContainerNotFound"), KindMissingBucket, "",
			[]string{`container "my-bucket" does not exist (Spillway never creates containers: create it, or fix storage.url): ContainerNotFound`}},
		{"azure unknown account (Azurite)", azureErr(404, "ResourceNotFound"), KindMissingBucket, "", []string{"storage account"}},
		{"azure wrong key", azureErr(403, "AuthenticationFailed"), KindCredentials, "", []string{"AZURE_STORAGE_CONNECTION_STRING", "AuthenticationFailed"}},
		{"azurite wrong key", azureErr(403, "AuthorizationFailure"), KindCredentials, "", nil},
		{"azure RBAC", azureErr(403, "AuthorizationPermissionMismatch"), KindAccessDenied, "", []string{`access to container "my-bucket" was denied`}},
		{"azure missing blob", azureErr(404, "BlobNotFound"), 0, "", nil},
		{"azure exists", azureErr(409, "BlobAlreadyExists"), 0, "", nil},
		{"azure busy", azureErr(503, "ServerBusy"), 0, "", nil},

		{"gcs missing bucket", fmt.Errorf("%w: %w", gcs.ErrBucketNotExist, &googleapi.Error{Code: 404}), KindMissingBucket, "",
			[]string{`bucket "my-bucket" does not exist`}},
		{"gcs write to missing bucket", &googleapi.Error{Code: 404}, KindMissingBucket, "", nil},
		{"gcs missing object", fmt.Errorf("%w: %w", gcs.ErrObjectNotExist, &googleapi.Error{Code: 404}), 0, "", nil},
		{"gcs unauthenticated", &googleapi.Error{Code: 401}, KindCredentials, "", []string{"GOOGLE_APPLICATION_CREDENTIALS", "HTTP 401"}},
		{"gcs forbidden", &googleapi.Error{Code: 403}, KindAccessDenied, "", []string{"HTTP 403"}},
		{"gcs throttled", &googleapi.Error{Code: 429}, 0, "", nil},
		{"gcs throttled, the old way", &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "userRateLimitExceeded"}}}, 0, "", nil},
		{"gcs forbidden, with a reason", &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "forbidden"}}}, KindAccessDenied, "", nil},
		{"gcs unavailable", &googleapi.Error{Code: 503}, 0, "", nil},

		{"network", &smithy.OperationError{Err: io.ErrUnexpectedEOF}, 0, "", nil},
		{"cancelled", context.Canceled, 0, "", nil},
		{"exists", ErrExists, 0, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Classify(tc.err, bucket)
			if IsFatal(tc.err) != (tc.kind != 0) {
				t.Errorf("IsFatal = %v, want %v", !(tc.kind != 0), tc.kind != 0)
			}
			if tc.kind == 0 {
				if f != nil {
					t.Fatalf("classified as %v (%v), want not fatal", f.Kind, f)
				}
				return
			}
			if f == nil {
				t.Fatalf("not classified, want %v", tc.kind)
			}
			if f.Kind != tc.kind || f.Region != tc.region {
				t.Errorf("kind %v region %q, want %v %q", f.Kind, f.Region, tc.kind, tc.region)
			}
			for _, w := range tc.want {
				if !strings.Contains(f.Error(), w) {
					t.Errorf("message does not contain %q:\n%s", w, f.Error())
				}
			}
			if !errors.Is(f, tc.err) {
				t.Error("the backend's error is not reachable through errors.Is")
			}
			// Wrapped further, it is still fatal and still found.
			wrapped := fmt.Errorf("storage: commit k: %w", f)
			var fe *FatalError
			if !IsFatal(wrapped) || !errors.As(wrapped, &fe) || fe.Kind != tc.kind {
				t.Errorf("wrapped: IsFatal %v, As %v", IsFatal(wrapped), fe)
			}
		})
	}
}

// TestFatalErrorHidesRawText: the message shows the backend's code, never
// the raw error, which may quote request details.
func TestFatalErrorHidesRawText(t *testing.T) {
	const secret = "SECRET-in-raw-error-text"
	err := fmt.Errorf("GET http://host/?sig=%s: %w", secret, &azcore.ResponseError{ErrorCode: "AuthenticationFailed", StatusCode: 403})
	f := Classify(err, "c")
	if f == nil {
		t.Fatal("not classified")
	}
	if strings.Contains(f.Error(), secret) || strings.Contains(fmt.Sprintf("%v %+v", f, f), secret) {
		t.Fatalf("message shows the raw error: %v", f)
	}
}
