package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/googleapis/gax-go/v2"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/s3blob"
)

// Retry bounds how one storage request (a part upload, the commit of an
// object, a list or read call) is retried when it fails for a reason that
// may pass: throttling (S3 503 SlowDown, 429, Azure 503 ServerBusy), other
// 5xx answers, timeouts and connection resets. Errors that can't pass
// (access denied, bad credentials, a missing bucket) are not retried.
//
// Each retry waits a random time between zero and
// min(MaxBackoff, InitialBackoff×2^(n-1)) ("full jitter"), so that many
// writers throttled at once don't come back in step. The defaults retry a
// request for about a minute of waiting at most (Budget) before the error
// stops the run; meanwhile the byte budget pauses consumption, so a storage
// brown-out costs time, not memory.
//
// It is the SDK's own retryer that is configured, below gocloud: a failed
// part is sent again from the copy the SDK keeps of it (S3 parts, GCS
// resumable-upload chunks, Azure blocks are each a replayable buffer). The
// object as a whole is never restarted, and its bytes, already streamed past
// our part queue, are not needed again.
type Retry struct {
	// MaxAttempts counts the tries of one request, the first included.
	// Default 10.
	MaxAttempts int
	// InitialBackoff caps the wait before the first retry. Default 500ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait before any retry. Default 15s.
	MaxBackoff time.Duration
}

// The defaults of Retry's fields.
const (
	defaultMaxAttempts    = 10
	defaultInitialBackoff = 500 * time.Millisecond
	defaultMaxBackoff     = 15 * time.Second
)

func (r Retry) withDefaults() Retry {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = defaultMaxAttempts
	}
	if r.InitialBackoff <= 0 {
		r.InitialBackoff = defaultInitialBackoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = defaultMaxBackoff
	}
	r.MaxBackoff = max(r.MaxBackoff, r.InitialBackoff)
	return r
}

// ceiling is the longest wait before retry n (n >= 1).
func (r Retry) ceiling(n int) time.Duration {
	d := r.InitialBackoff
	for i := 1; i < n && d < r.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.MaxBackoff)
}

// Budget is the longest total wait between the tries of one request: with
// the defaults 0.5+1+2+4+8+4×15 s = 75.5 s, half that on average. The tries
// themselves come on top. Zero fields count as their defaults.
func (r Retry) Budget() time.Duration {
	r = r.withDefaults()
	var sum time.Duration
	for n := 1; n < r.MaxAttempts; n++ {
		sum += r.ceiling(n)
	}
	return sum
}

// delay is the full-jitter wait before retry n.
func (r Retry) delay(n int) time.Duration {
	c := r.ceiling(n)
	if c <= 0 {
		return 0
	}
	return rand.N(c + 1)
}

// openRemote opens a gocloud bucket whose SDK client retries by r. The
// URL's own parameters keep the meaning gocloud gives them: each opener
// is gocloud's, and only the client beneath it is rebuilt or tuned.
func openRemote(ctx context.Context, u *url.URL, rawURL string, r Retry) (*blob.Bucket, error) {
	r = r.withDefaults()
	switch u.Scheme {
	case "s3":
		return openS3(ctx, u, r)
	case "gs":
		return openGCS(ctx, rawURL, r)
	case "azblob":
		return openAzure(ctx, u, r)
	default:
		return blob.OpenBucket(ctx, rawURL)
	}
}

// openS3 opens the bucket with gocloud's URL opener, then rebuilds its
// client with our retryer. gocloud offers no way to pass a retryer, and
// parsing the URL ourselves would drift from what gocloud accepts
// (region, endpoint, profile, ssetype, kmskeyid, accelerate, ...). The
// opener leaves the s3blob.Options it parsed in its Options field, so the
// bucket reopened over the new client keeps encryption and checksum
// settings.
func openS3(ctx context.Context, u *url.URL, r Retry) (*blob.Bucket, error) {
	opener := &s3blob.URLOpener{}
	first, err := opener.OpenBucketURL(ctx, u)
	if err != nil {
		return nil, err
	}
	var client *s3.Client
	ok := first.As(&client)
	_ = first.Close()
	if !ok {
		return nil, errors.New("s3 bucket without an s3 client")
	}
	client = s3.New(client.Options(), func(o *s3.Options) {
		o.Retryer = awsRetryer(r)
		// AWS_MAX_ATTEMPTS / AWS_RETRY_MODE would wrap our retryer with
		// their own count: one policy, ours, is simpler to reason about.
		o.RetryMaxAttempts = 0
		o.RetryMode = ""
	})
	return s3blob.OpenBucket(ctx, client, u.Host, &opener.Options)
}

// awsRetryer is the SDK's standard retryer (which already retries 500, 502,
// 503, 504, SlowDown and other throttling codes, timeouts and connection
// errors), with our counts and backoff, 429 added (S3-compatible stores
// throttle with it), and no client-side retry quota: the quota is a token
// bucket shared by every request of the client, and a burst of throttling
// would empty it and then fail requests without retrying them, which is
// the opposite of what a sink that can wait needs. Our own upload
// concurrency already bounds how many requests retry at once.
func awsRetryer(r Retry) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = r.MaxAttempts
		o.MaxBackoff = r.MaxBackoff
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return r.delay(attempt), nil
		})
		o.RateLimiter = ratelimit.None
		o.Retryables = append(o.Retryables, retry.RetryableHTTPStatusCode{Codes: map[int]struct{}{429: {}}})
	})
}

// openGCS sets the retry policy on the bucket's own storage client: gcsblob
// makes one client per opened bucket, so this touches no other bucket. The
// policy stays RetryIdempotent: our writes are create-only (ifGenerationMatch=0),
// which makes them idempotent, so uploads are retried too. Resumable-upload
// chunks are retried by the upload itself, bounded in time by the writer's
// ChunkRetryDeadline (gcsChunkHook), not by MaxAttempts.
func openGCS(ctx context.Context, rawURL string, r Retry) (*blob.Bucket, error) {
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	var client *storage.Client
	if b.As(&client) {
		client.SetRetry(
			storage.WithBackoff(gax.Backoff{Initial: r.InitialBackoff, Max: r.MaxBackoff, Multiplier: 2}),
			storage.WithMaxAttempts(r.MaxAttempts),
			storage.WithPolicy(storage.RetryIdempotent),
		)
	}
	return b, nil
}

// gcsChunkHook returns a BeforeWrite hook that bounds the retries of one
// resumable-upload chunk by time, consistently with r, or nil when b is not
// a GCS bucket. The library's default (32 s) would give up on a chunk well
// before the other backends give up on a part.
func gcsChunkHook(b *blob.Bucket, r Retry) func(func(any) bool) error {
	var client *storage.Client
	if !b.As(&client) {
		return nil
	}
	// The deadline counts sending the chunk too, not only the waits.
	deadline := r.Budget() + time.Minute
	return func(as func(any) bool) error {
		var w *storage.Writer
		if as(&w) {
			w.ChunkRetryDeadline = deadline
		}
		return nil
	}
}

// openAzure opens the container with gocloud's URL opener (which reads the
// domain, protocol and emulator settings from the URL and environment) but
// our own client factory, which gives the client our retry options.
// gocloud's default factory sets none and can't be told to. It reads the
// same environment variables as gocloud's, and reads them at every Open,
// not once per process.
func openAzure(ctx context.Context, u *url.URL, r Retry) (*blob.Bucket, error) {
	opener := &azureblob.URLOpener{
		MakeClient:        azureClientFactory(r),
		ServiceURLOptions: *azureblob.NewDefaultServiceURLOptions(),
	}
	return opener.OpenBucketURL(ctx, u)
}

func azureClientFactory(r Retry) func(azureblob.ServiceURL, azureblob.ContainerName) (*container.Client, error) {
	return func(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
		// MaxRetries counts retries, not tries, and azcore reads 0 as "the
		// default, 3": no retries must be said as -1.
		retries := int32(r.MaxAttempts - 1)
		if retries == 0 {
			retries = -1
		}
		opts := &container.ClientOptions{}
		opts.Retry = policy.RetryOptions{
			MaxRetries:    retries,
			RetryDelay:    r.InitialBackoff,
			MaxRetryDelay: r.MaxBackoff,
			// StatusCodes nil: 408, 429, 500, 502, 503, 504. Transport
			// errors (resets, timeouts) are always retried.
		}
		containerURL, err := url.JoinPath(string(svcURL), string(name))
		if err != nil {
			return nil, err
		}
		account, key := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_KEY")
		conn := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
		if conn == "" {
			conn = os.Getenv("AZURE_STORAGEBLOB_CONNECTIONSTRING")
		}
		// The same precedence as gocloud's default factory.
		switch {
		case account != "" && key != "":
			cred, err := azblob.NewSharedKeyCredential(account, key)
			if err != nil {
				return nil, fmt.Errorf("azure shared key: %w", err)
			}
			return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
		case os.Getenv("AZURE_STORAGE_SAS_TOKEN") != "":
			// The token is in the service URL already.
			return container.NewClientWithNoCredential(containerURL, opts)
		case conn != "":
			return container.NewClientFromConnectionString(conn, string(name), opts)
		default:
			cred, err := azidentity.NewDefaultAzureCredential(nil)
			if err != nil {
				return nil, fmt.Errorf("azure default credential: %w", err)
			}
			return container.NewClient(containerURL, cred, opts)
		}
	}
}
