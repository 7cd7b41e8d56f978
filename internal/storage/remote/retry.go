package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/googleapis/gax-go/v2"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"google.golang.org/api/option"

	"github.com/spillway/spillway/internal/azureenv"
	"github.com/spillway/spillway/internal/storage/storeerr"
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

	// onRetry, when set, is told of each failed try the SDK retries, by
	// storeerr.RetryClass (Options.OnRetry sets it).
	onRetry func(class string)
	// getenv, when set, replaces os.Getenv for the settings the clients
	// read from the environment (Options.Getenv sets it).
	getenv func(string) string
}

// env reads the environment variable name, through getenv when set.
func (r Retry) env(name string) string {
	if r.getenv != nil {
		return r.getenv(name)
	}
	return os.Getenv(name)
}

func (r Retry) retried(err error, status int) {
	if r.onRetry == nil {
		return
	}
	if status == 0 {
		status = storeerr.StatusOf(err)
	}
	r.onRetry(storeerr.RetryClass(status))
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

// OpenBlob opens a gocloud bucket whose SDK client retries by r. The
// URL's own parameters keep the meaning gocloud gives them: each opener
// is gocloud's, and only the client beneath it is rebuilt or tuned. The
// exception is an Azure connection string (see openAzure), which names
// the endpoint itself.
//
// closeConns closes the connections of the bucket's own HTTP client (see
// conns); call it after the bucket's Close. Real GCS, with credentials,
// is the exception: gocloud's opener gives its client
// http.DefaultTransport, shared by the process.
func OpenBlob(ctx context.Context, u *url.URL, rawURL string, r Retry) (b *blob.Bucket, closeConns func(), err error) {
	r = r.withDefaults()
	c := newConns()
	switch u.Scheme {
	case "s3":
		b, err = openS3(ctx, u, r, c)
	case "gs":
		b, err = openGCS(ctx, u, rawURL, r, c.httpClient())
	case "azblob":
		b, err = openAzure(ctx, u, r, c.httpClient())
	default:
		b, err = blob.OpenBucket(ctx, rawURL)
	}
	if err != nil {
		c.closeAll()
		return nil, nil, err
	}
	return b, c.closeAll, nil
}

// openS3 opens the bucket with gocloud's URL opener, then rebuilds its
// client with our retryer. gocloud offers no way to pass a retryer, and
// parsing the URL ourselves would drift from what gocloud accepts
// (region, endpoint, profile, ssetype, kmskeyid, accelerate, ...). The
// opener leaves the s3blob.Options it parsed in its Options field, so the
// bucket reopened over the new client keeps encryption and checksum
// settings.
func openS3(ctx context.Context, u *url.URL, r Retry, c *conns) (*blob.Bucket, error) {
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
		// The SDK's own client, with every setting it resolved
		// (timeouts, a CA bundle from the environment), dialing through c.
		if bc, ok := o.HTTPClient.(*awshttp.BuildableClient); ok {
			o.HTTPClient = bc.WithTransportOptions(func(tr *http.Transport) {
				tr.DialContext = c.dialer(tr.DialContext)
			})
		}
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
	std := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = r.MaxAttempts
		o.MaxBackoff = r.MaxBackoff
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return r.delay(attempt), nil
		})
		o.RateLimiter = ratelimit.None
		o.Retryables = append(o.Retryables, retry.RetryableHTTPStatusCode{Codes: map[int]struct{}{429: {}}})
	})
	if r.onRetry == nil {
		return std
	}
	return countingRetryer{std, r}
}

// countingRetryer tells Retry.onRetry of each retry: the SDK asks for the
// delay only once it has decided to retry.
type countingRetryer struct {
	aws.Retryer
	r Retry
}

func (c countingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	c.r.retried(err, 0)
	return c.Retryer.RetryDelay(attempt, err)
}

// openGCS sets the retry policy on the bucket's own storage client: gcsblob
// makes one client per opened bucket, so this touches no other bucket. The
// policy stays RetryIdempotent: our writes are create-only (ifGenerationMatch=0),
// which makes them idempotent, so uploads are retried too. Resumable-upload
// chunks are retried by the upload itself, bounded in time by the writer's
// ChunkRetryDeadline (gcsChunkHook), not by MaxAttempts.
//
// An emulator host (STORAGE_EMULATOR_HOST, from Retry.getenv when
// Options.Getenv is set, else from the process environment) is used as
// gocloud uses it, but over hc, so that the bucket's Close can close its
// connections. Real GCS goes through gocloud's opener, whose client uses
// http.DefaultTransport.
func openGCS(ctx context.Context, u *url.URL, rawURL string, r Retry, hc *http.Client) (*blob.Bucket, error) {
	var (
		b   *blob.Bucket
		err error
	)
	if host := r.env("STORAGE_EMULATOR_HOST"); host != "" {
		b, err = openGCSEmulator(ctx, u.Host, host, hc)
	} else {
		b, err = blob.OpenBucket(ctx, rawURL)
	}
	if err != nil {
		return nil, err
	}
	var client *storage.Client
	if b.As(&client) {
		client.SetRetry(
			storage.WithBackoff(gax.Backoff{Initial: r.InitialBackoff, Max: r.MaxBackoff, Multiplier: 2}),
			storage.WithMaxAttempts(r.MaxAttempts),
			storage.WithPolicy(storage.RetryIdempotent),
			storage.WithErrorFunc(func(err error) bool {
				ok := storage.ShouldRetry(err)
				if ok {
					r.retried(err, 0)
				}
				return ok
			}),
		)
	}
	return b, nil
}

// openGCSEmulator opens bucket on the GCS emulator at host (host:port), as
// gocloud's opener does when STORAGE_EMULATOR_HOST names it: no
// credentials, the JSON API at http://host/storage/v1/. The explicit
// endpoint wins over the process's STORAGE_EMULATOR_HOST, for reads too.
func openGCSEmulator(ctx context.Context, bucket, host string, hc *http.Client) (*blob.Bucket, error) {
	client, err := storage.NewClient(ctx,
		option.WithoutAuthentication(),
		option.WithEndpoint("http://"+host+"/storage/v1/"),
		option.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return gcsblob.OpenBucket(ctx, nil, bucket, &gcsblob.Options{Client: client})
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

// azureURLParamList names the azblob:// URL's parameters, for messages.
const azureURLParamList = "domain=, protocol=, cdn=, localemu= and storage_account="

// openAzure opens the container with a client that retries by r. gocloud's
// default client sets no retry options and can't be told to, so the client
// is ours; the environment is read at every Open, not once per process.
//
// A connection string names its own endpoint (BlobEndpoint, or AccountName
// with EndpointSuffix), and the SDK's connection-string constructor takes
// it as it is: Azurite's standard string, with its http://127.0.0.1
// endpoint, works with nothing else set. gocloud's URL opener would first
// build a service URL from AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL and
// AZURE_STORAGE_IS_LOCAL_EMULATOR, which a connection string doesn't use,
// and refuse the string's http protocol unless told that the endpoint is an
// emulator.
//
// Otherwise (an account with a key or SAS token, or the default identity)
// the opener builds the service URL from those variables and the URL's own
// parameters, as gocloud documents, and a setting it refuses is named.
func openAzure(ctx context.Context, u *url.URL, r Retry, hc *http.Client) (*blob.Bucket, error) {
	creds := azureenv.From(r.env)
	if creds.UseConn() {
		if len(u.Query()) > 0 {
			params := slices.Sorted(maps.Keys(u.Query()))
			return nil, fmt.Errorf("storage.url: remove %s=: %s names the endpoint, and the azblob:// parameters (%s) would have no effect",
				strings.Join(params, "=, "), creds.ConnVar, azureURLParamList)
		}
		client, err := container.NewClientFromConnectionString(creds.Conn, u.Host, azureClientOptions(r, hc))
		if err != nil {
			// The SDK's parse errors say what is missing and quote no
			// part of the string.
			return nil, fmt.Errorf("%s: %w", creds.ConnVar, err)
		}
		return azureblob.OpenBucket(ctx, client, nil)
	}
	// The opener builds the service URL, then calls MakeClient: an error
	// before that call is about the service URL's settings.
	urlBuilt := false
	makeClient := azureClientFactory(r, creds, hc)
	opener := &azureblob.URLOpener{
		MakeClient: func(svc azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
			urlBuilt = true
			return makeClient(svc, name)
		},
		ServiceURLOptions: *azureblob.NewDefaultServiceURLOptions(),
	}
	b, err := opener.OpenBucketURL(ctx, u)
	if err != nil && !urlBuilt {
		return nil, fmt.Errorf("%w; %s", err, azureEndpointHint(u, creds))
	}
	return b, err
}

func azureClientOptions(r Retry, hc *http.Client) *container.ClientOptions {
	// MaxRetries counts retries, not tries, and azcore reads 0 as "the
	// default, 3": no retries must be said as -1.
	retries := int32(r.MaxAttempts - 1)
	if retries == 0 {
		retries = -1
	}
	opts := &container.ClientOptions{}
	opts.Transport = hc
	opts.Retry = policy.RetryOptions{
		MaxRetries:    retries,
		RetryDelay:    r.InitialBackoff,
		MaxRetryDelay: r.MaxBackoff,
		// StatusCodes nil: 408, 429, 500, 502, 503, 504. Transport
		// errors (resets, timeouts) are always retried.
	}
	if r.onRetry != nil {
		// ShouldRetry replaces the status check: make the same one, and
		// count. (The last try is counted too: azcore asks before it
		// checks MaxRetries.)
		opts.Retry.ShouldRetry = func(resp *http.Response, err error) bool {
			if err == nil && !azruntime.HasStatusCode(resp, 408, 429, 500, 502, 503, 504) {
				return false
			}
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			r.retried(err, status)
			return true
		}
	}
	return opts
}

// azureClientFactory makes the client for gocloud's URL opener, from the
// credentials that come before a connection string.
func azureClientFactory(r Retry, creds azureenv.Creds, hc *http.Client) func(azureblob.ServiceURL, azureblob.ContainerName) (*container.Client, error) {
	return func(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
		opts := azureClientOptions(r, hc)
		containerURL, err := url.JoinPath(string(svcURL), string(name))
		if err != nil {
			return nil, err
		}
		switch {
		case creds.Account != "" && creds.Key != "":
			cred, err := azblob.NewSharedKeyCredential(creds.Account, creds.Key)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", azureenv.Key, err)
			}
			return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
		case creds.SAS != "":
			// The token is in the service URL already.
			return container.NewClientWithNoCredential(containerURL, opts)
		default:
			cred, err := azidentity.NewDefaultAzureCredential(nil)
			if err != nil {
				return nil, fmt.Errorf("azure default credential: %w", err)
			}
			return container.NewClient(containerURL, cred, opts)
		}
	}
}

// azureEndpointHint says which setting to change when gocloud's opener
// can't build the service URL from the environment and storage.url. It
// follows the checks of azureblob.NewServiceURL, and names each value's
// source: a storage.url parameter overrides its variable.
func azureEndpointHint(u *url.URL, creds azureenv.Creds) string {
	q := u.Query()
	for k := range q {
		switch k {
		case "domain", "protocol", "cdn", "localemu", "storage_account":
		default:
			return fmt.Sprintf("storage.url: remove %s=; azblob:// takes %s", k, azureURLParamList)
		}
	}
	o := azureblob.NewDefaultServiceURLOptions()
	from := func(param, env string) string {
		if q.Has(param) {
			return param + "= in storage.url"
		}
		return env
	}
	var hint string
	if creds.Conn != "" {
		// gocloud's order: the string is not the credential, yet its
		// protocol and account still feed the service URL.
		hint = fmt.Sprintf("%s is not used while %s with %s, or %s, is set: unset those to use it; ", creds.ConnVar, azureenv.Account, azureenv.Key, azureenv.SAS)
	}
	account := o.AccountName
	if q.Has("storage_account") {
		account = q.Get("storage_account")
	}
	protocol := strings.ToLower(o.Protocol)
	if q.Has("protocol") {
		protocol = strings.ToLower(q.Get("protocol"))
	}
	emulator := o.IsLocalEmulator
	if q.Has("localemu") {
		emulator, _ = strconv.ParseBool(q.Get("localemu"))
	}
	switch {
	case account == "":
		return hint + fmt.Sprintf("no storage account: set %s, or %s (or storage_account= in storage.url) with %s, %s or an Azure identity",
			azureenv.Conn, azureenv.Account, azureenv.Key, azureenv.SAS)
	case q.Has("localemu") && q.Get("localemu") != "" && !isBool(q.Get("localemu")):
		return hint + "localemu= in storage.url must be true or false"
	case q.Has("cdn") && !isBool(q.Get("cdn")):
		return hint + "cdn= in storage.url must be true or false"
	case protocol == "http" && !emulator:
		source := from("protocol", azureenv.Protocol)
		if !q.Has("protocol") && os.Getenv(azureenv.Protocol) == "" {
			source = "DefaultEndpointsProtocol of " + creds.ConnVar
		}
		return hint + fmt.Sprintf("http is for a local emulator only: set %s=true (or localemu=true in storage.url) and %s=host:port of the emulator, or use https in %s",
			azureenv.Emulator, azureenv.Domain, source)
	case protocol != "http" && protocol != "https" && protocol != "":
		return hint + fmt.Sprintf("%s must be http or https", from("protocol", azureenv.Protocol))
	case emulator && protocol != "http":
		return hint + fmt.Sprintf("a local emulator is reached over http: set %s=http, or unset %s", from("protocol", azureenv.Protocol), from("localemu", azureenv.Emulator))
	case emulator:
		return hint + fmt.Sprintf("a local emulator must be on this machine: set %s to a loopback host:port such as 127.0.0.1:10000", from("domain", azureenv.Domain))
	default:
		return hint + fmt.Sprintf("check %s (an Azure storage domain such as blob.core.windows.net) and %s (letters and digits), or use %s, whose endpoint is taken as it is",
			from("domain", azureenv.Domain), from("storage_account", azureenv.Account), azureenv.Conn)
	}
}

func isBool(s string) bool {
	_, err := strconv.ParseBool(s)
	return err == nil
}
