// Package storeerr says what a storage error means: a problem no retry
// can fix (a missing bucket, refused credentials, a denied permission, a
// wrong region, an invalid bucket name) as a *FatalError that names the
// bucket and what to change, or one that may pass; and its class, for
// metrics. It reads the errors of gocloud.dev and of the S3, GCS and Azure
// SDKs beneath it, and knows nothing of how they were opened.
package storeerr

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	gcsauth "cloud.google.com/go/auth"
	gcs "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

// Kind says what a fatal storage error is about, and so what to fix.
type Kind int

// The kinds of fatal errors. Each is a problem of configuration or
// permissions that no retry can fix: Spillway should stop and say so rather
// than retry forever with consumption paused.
const (
	// KindMissingBucket: the bucket or container does not exist.
	KindMissingBucket Kind = iota + 1
	// KindCredentials: the store refused the credentials themselves (unknown
	// key, wrong secret, bad token), or none were found.
	KindCredentials
	// KindAccessDenied: the credentials are valid but lack a permission.
	KindAccessDenied
	// KindWrongRegion: the S3 bucket lives in another region than the URL
	// says.
	KindWrongRegion
	// KindBadBucketName: the store rejects the bucket name itself.
	KindBadBucketName
)

func (k Kind) String() string {
	switch k {
	case KindMissingBucket:
		return "missing bucket"
	case KindCredentials:
		return "credentials refused"
	case KindAccessDenied:
		return "access denied"
	case KindWrongRegion:
		return "wrong region"
	case KindBadBucketName:
		return "invalid bucket name"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Backends, for the hints of FatalError.
const (
	backendS3    = "s3"
	backendGCS   = "gcs"
	backendAzure = "azure"
)

// ErrExists is returned by a commit when an object already exists under
// the name and the backend enforces create-only writes.
var ErrExists = errors.New("object already exists")

// FatalError is a storage error that retrying will not fix. Its message
// names the bucket and says what to change; it shows only the backend's
// error code, never the raw error text, which may quote request details.
// The backend's error stays reachable through errors.As.
type FatalError struct {
	Kind Kind
	// Bucket is the bucket or container name, when known.
	Bucket string
	// Code is the backend's own error code, such as SignatureDoesNotMatch,
	// ContainerNotFound or "HTTP 403".
	Code string
	// Region is the bucket's real region, for KindWrongRegion, when the
	// store said which.
	Region string
	// Action is what was being attempted ("list objects under \"raw/\""),
	// when the caller knows it; it narrows down a missing permission.
	Action string
	// Detail is an extra hint (for missing credentials: why none were
	// found). It must hold no secret.
	Detail string

	backend string
	err     error
}

// Error says what is wrong and what to fix, then the backend's code.
func (e *FatalError) Error() string {
	what, name := "bucket", e.Bucket
	if e.backend == backendAzure {
		what = "container"
	}
	ref := fmt.Sprintf("%s %q", what, name)
	if name == "" {
		ref = "the " + what
	}
	var msg string
	switch e.Kind {
	case KindMissingBucket:
		if e.Code == "ResourceNotFound" {
			// Azure's answer when the account itself is unknown (Azurite),
			// or the path does not name a container.
			msg = fmt.Sprintf("%s or its storage account does not exist (Spillway never creates containers: create it, or fix storage.url and the account name)", ref)
		} else {
			msg = fmt.Sprintf("%s does not exist (Spillway never creates %ss: create it, or fix storage.url)", ref, what)
		}
	case KindCredentials:
		if e.Code == codeNoCredentials {
			msg = fmt.Sprintf("no usable credentials were found for %s (%s)", ref, credentialHint(e.backend))
		} else {
			msg = fmt.Sprintf("the credentials were refused by %s (%s)", ref, credentialHint(e.backend))
		}
	case KindAccessDenied:
		msg = fmt.Sprintf("access to %s was denied", ref)
		if e.Action != "" {
			msg += " when trying to " + e.Action
		}
		if strings.HasPrefix(e.Action, "delete ") {
			// Only the preflight deletes, and only its own probe.
			msg += " (only the startup check deletes, its own probe object: grant delete, or remove the probe by hand)"
		} else {
			msg += " (the credentials lack a permission Spillway needs: see docs/storage.md, \"Permissions\", for the list)"
		}
	case KindWrongRegion:
		if e.Region != "" {
			msg = fmt.Sprintf("%s is in region %s, not the one configured (set region=%s in storage.url)", ref, e.Region, e.Region)
		} else {
			msg = fmt.Sprintf("%s is in another region than the one configured (fix region= in storage.url)", ref)
		}
	case KindBadBucketName:
		msg = fmt.Sprintf("%s is not a valid %s name (fix storage.url)", ref, what)
	default:
		msg = fmt.Sprintf("%s: %s", ref, e.Kind)
	}
	if e.Code != "" && e.Code != codeNoCredentials {
		msg += ": " + e.Code
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the backend's error.
func (e *FatalError) Unwrap() error { return e.err }

func credentialHint(backend string) string {
	switch backend {
	case backendS3:
		return "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role"
	case backendGCS:
		return "check GOOGLE_APPLICATION_CREDENTIALS or the service account"
	case backendAzure:
		return "check AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, or the Azure identity"
	}
	return "check the credentials"
}

// NoS3Credentials is the fatal error of an S3 client that found no
// credentials to send at all, at startup (see remote's preflight): detail
// says why, as the SDK's credential chain put it, and must hold no secret.
func NoS3Credentials(bucket, detail string, err error) *FatalError {
	return &FatalError{Kind: KindCredentials, Bucket: bucket, Code: codeNoCredentials, Detail: detail, backend: backendS3, err: err}
}

// codeNoCredentials marks a KindCredentials error where the client found no
// credentials to send at all.
const codeNoCredentials = "no credentials"

// IsFatal reports whether err is a storage error that retrying will not fix:
// a missing bucket, refused credentials, a denied permission, a wrong
// region, an invalid bucket name. Whoever retries storage operations should
// stop at once on these and fail with the error's message. It accepts
// errors straight from gocloud or the SDKs as well as Spillway's own.
func IsFatal(err error) bool {
	var fe *FatalError
	return errors.As(err, &fe) || Classify(err, "") != nil
}

// Classify returns the FatalError that err is, naming bucket, or nil when
// err may be transient or is not about the bucket (a missing key, a
// conflict). Backend-specific codes come first: gocloud's gcerrors codes
// are too coarse (S3's NoSuchKey and NoSuchBucket are both NotFound; GCS's
// 403 is NotFound too; a wrong S3 secret is Unknown).
func Classify(err error, bucket string) *FatalError {
	if err == nil {
		return nil
	}
	var fe *FatalError
	if errors.As(err, &fe) {
		return fe
	}
	f := classifyS3(err)
	if f == nil {
		f = classifyAzure(err)
	}
	if f == nil {
		f = classifyGCS(err)
	}
	if f == nil && gcerrors.Code(err) == gcerrors.PermissionDenied {
		f = &FatalError{Kind: KindAccessDenied, Code: "PermissionDenied"}
	}
	if f == nil {
		return nil
	}
	f.Bucket, f.err = bucket, err
	return f
}

// S3 error codes, by kind. XAdminUserNotFound is versitygw's answer to an
// unknown access key (AWS says InvalidAccessKeyId).
var (
	s3Credentials = []string{"InvalidAccessKeyId", "SignatureDoesNotMatch", "XAdminUserNotFound", "InvalidToken", "InvalidSecurity"}
	s3Denied      = []string{"AccessDenied", "AllAccessDisabled", "AccountProblem"}
	// A wrong region: AWS redirects (301 PermanentRedirect, or a bare 301
	// on HEAD) or refuses the signature scope (400
	// AuthorizationHeaderMalformed, "the region 'us-east-1' is wrong;
	// expecting 'eu-west-1'").
	s3Region = []string{"PermanentRedirect", "IllegalLocationConstraintException", "AuthorizationHeaderMalformed"}
)

// expectingRegion finds the right region in AuthorizationHeaderMalformed's
// message. AWS quotes it with ' and versitygw with ".
var expectingRegion = regexp.MustCompile(`expecting ['"]([a-z0-9-]+)['"]`)

func classifyS3(err error) *FatalError {
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status, region := 0, ""
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		status = re.HTTPStatusCode()
		region = re.Response.Header.Get("X-Amz-Bucket-Region")
	}
	if code == "" && status == 0 {
		return nil
	}
	f := &FatalError{Code: code, backend: backendS3}
	switch {
	case code == "NoSuchBucket":
		f.Kind = KindMissingBucket
	case code == "InvalidBucketName":
		f.Kind = KindBadBucketName
	case slices.Contains(s3Credentials, code):
		f.Kind = KindCredentials
	case slices.Contains(s3Denied, code):
		f.Kind = KindAccessDenied
	case code == "AuthorizationHeaderMalformed" && ae != nil && !strings.Contains(ae.ErrorMessage(), "region"):
		// Malformed for another reason than the region: a credential
		// with a stray character, say.
		f.Kind = KindCredentials
	case slices.Contains(s3Region, code) || status == http.StatusMovedPermanently:
		f.Kind = KindWrongRegion
		if region == "" && ae != nil {
			if m := expectingRegion.FindStringSubmatch(ae.ErrorMessage()); m != nil {
				region = m[1]
			}
		}
		f.Region = region
		if f.Code == "" {
			f.Code = "HTTP 301"
		}
	default:
		return nil
	}
	return f
}

// Azure error codes, by kind. AuthorizationFailure is what Azurite answers
// to a wrong key; Azure itself uses it for requests its network rules or a
// SAS do not allow, which the credential hint also covers.
var (
	azureMissing     = []string{"ContainerNotFound", "ResourceNotFound", "ContainerBeingDeleted", "ContainerDisabled"}
	azureCredentials = []string{"AuthenticationFailed", "AuthorizationFailure", "InvalidAuthenticationInfo", "NoAuthenticationInformation"}
	azureDenied      = []string{"AuthorizationPermissionMismatch", "AuthorizationSourceIPMismatch", "AuthorizationProtocolMismatch",
		"AuthorizationResourceTypeMismatch", "AuthorizationServiceMismatch", "InsufficientAccountPermissions", "AccountIsDisabled"}
)

func classifyAzure(err error) *FatalError {
	var ide *azidentity.AuthenticationFailedError
	if errors.As(err, &ide) {
		return &FatalError{Kind: KindCredentials, Code: "AuthenticationFailedError", backend: backendAzure}
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return nil
	}
	f := &FatalError{Code: re.ErrorCode, backend: backendAzure}
	switch {
	case slices.Contains(azureMissing, re.ErrorCode):
		f.Kind = KindMissingBucket
	case re.ErrorCode == "InvalidResourceName":
		f.Kind = KindBadBucketName
	case slices.Contains(azureCredentials, re.ErrorCode):
		f.Kind = KindCredentials
	case slices.Contains(azureDenied, re.ErrorCode):
		f.Kind = KindAccessDenied
	default:
		return nil
	}
	return f
}

func classifyGCS(err error) *FatalError {
	if errors.Is(err, gcs.ErrBucketNotExist) {
		return &FatalError{Kind: KindMissingBucket, Code: "HTTP 404", backend: backendGCS}
	}
	// A token the auth server refuses: a revoked or malformed key file.
	var ae *gcsauth.Error
	if errors.As(err, &ae) && ae.Response != nil && ae.Response.StatusCode >= 400 && ae.Response.StatusCode < 500 &&
		ae.Response.StatusCode != http.StatusTooManyRequests {
		return &FatalError{Kind: KindCredentials, Code: fmt.Sprintf("token HTTP %d", ae.Response.StatusCode), backend: backendGCS}
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return nil
	}
	f := &FatalError{Code: fmt.Sprintf("HTTP %d", ge.Code), backend: backendGCS}
	switch ge.Code {
	case http.StatusUnauthorized:
		f.Kind = KindCredentials
	case http.StatusForbidden:
		// Google's older quota answers are 403s too; they pass.
		for _, it := range ge.Errors {
			if strings.Contains(it.Reason, "RateLimitExceeded") || strings.Contains(it.Reason, "rateLimitExceeded") {
				return nil
			}
		}
		f.Kind = KindAccessDenied
	case http.StatusNotFound:
		// A missing object is the caller's business (a read, a delete);
		// a write or a list can only miss the bucket.
		if errors.Is(err, gcs.ErrObjectNotExist) {
			return nil
		}
		f.Kind = KindMissingBucket
	default:
		return nil
	}
	return f
}
