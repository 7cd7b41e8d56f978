// Package faultproxy is an HTTP reverse proxy on 127.0.0.1 that stands in
// front of a storage emulator (versitygw, fake-gcs-server, Azurite) and
// injects the faults a real object store shows under load: throttling and
// 5xx answers with the backend's own error bodies, stalls that hold
// requests until released, connection resets in the middle of an upload's
// body, and slow bandwidth. It can also drop request headers, standing in
// for an S3-compatible store that ignores them (If-None-Match).
//
// Faults are programmed at runtime with rules (Proxy.Inject): which
// requests they hit (a Match function such as PartUploads), how often
// (every Nth match) and how many times (Limit). Every rule counts the faults
// it injected, so a test can assert that the faults it meant really
// happened, and fail instead of passing on a quiet proxy.
//
// It is for tests only, never imported by the binary.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Kind is a kind of fault.
type Kind int

// The kinds of fault.
const (
	// Error answers with Fault.Status, Header and Body instead of
	// forwarding. The request body is read first, as a server that
	// received it and then refused would.
	Error Kind = iota + 1
	// Stall holds the request before forwarding it, until the rule is
	// released (Injection.Release), the client gives up or the proxy
	// closes.
	Stall
	// Reset reads Fault.ResetAfter bytes of the request body, then resets
	// the TCP connection (RST): the client sees "connection reset" mid-body
	// and the backend never sees the request.
	Reset
	// Slow forwards the request with its body, and the response's,
	// throttled to Fault.BytesPerSecond.
	Slow
	// Strip forwards the request without the headers named in
	// Fault.Strip, as a store that doesn't know them behaves: an
	// S3-compatible store without conditional writes ignores
	// If-None-Match. S3 signs such headers, so the proxy needs
	// Options.ResignS3 to strip them from S3 requests.
	Strip
	numKinds
)

func (k Kind) String() string {
	switch k {
	case Error:
		return "error"
	case Stall:
		return "stall"
	case Reset:
		return "reset"
	case Slow:
		return "slow"
	case Strip:
		return "strip"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Fault is what happens to a request a rule picks.
type Fault struct {
	Kind Kind
	// Status, Header and Body are the answer of an Error fault.
	Status int
	Header http.Header
	Body   string
	// ResetAfter is how many body bytes a Reset fault reads before it
	// resets the connection. A body shorter than that is read whole and
	// the connection is reset before any answer.
	ResetAfter int64
	// BytesPerSecond is the bandwidth of a Slow fault.
	BytesPerSecond int64
	// Strip names the headers a Strip fault removes.
	Strip []string
}

// Rule picks requests and says what fault they get.
type Rule struct {
	// Match selects the requests the rule applies to; nil selects all.
	// It must not read the body.
	Match func(*http.Request) bool
	// Every injects on every Nth matching request (the Nth, 2Nth, ...);
	// 0 or 1 injects on every match.
	Every int
	// Limit stops the rule after this many faults; 0 means no limit.
	Limit int
	Fault Fault
}

// Injection is a rule installed in a proxy. Its methods are safe for
// concurrent use.
type Injection struct {
	rule     Rule
	p        *Proxy
	matched  atomic.Int64
	injected atomic.Int64
	held     atomic.Int64
	release  chan struct{} // closed by Release
	once     sync.Once
}

// Count is how many faults the rule injected so far.
func (in *Injection) Count() int64 { return in.injected.Load() }

// Held is how many requests a Stall rule is holding now.
func (in *Injection) Held() int64 { return in.held.Load() }

// Release removes the rule: it injects nothing more, and the requests a
// Stall rule holds go on to the backend. It may be called more than once.
func (in *Injection) Release() {
	in.once.Do(func() {
		in.p.mu.Lock()
		for i, r := range in.p.rules {
			if r == in {
				in.p.rules = append(in.p.rules[:i:i], in.p.rules[i+1:]...)
				break
			}
		}
		in.p.mu.Unlock()
		close(in.release)
	})
}

// pick decides whether this matching request gets the fault, and counts it.
func (in *Injection) pick() bool {
	n := in.matched.Add(1)
	every := int64(max(in.rule.Every, 1))
	if n%every != 0 {
		return false
	}
	if in.rule.Limit > 0 {
		for {
			c := in.injected.Load()
			if c >= int64(in.rule.Limit) {
				return false
			}
			if in.injected.CompareAndSwap(c, c+1) {
				return true
			}
		}
	}
	in.injected.Add(1)
	return true
}

// Options tune the proxy.
type Options struct {
	// PreserveHost forwards the client's Host header instead of the
	// backend's. S3 needs it: SigV4 signs the Host header, and a rewritten
	// one fails every signature. fake-gcs-server needs the opposite: it
	// serves objects only under its configured public host.
	PreserveHost bool
	// ResignS3, when set, signs a request a Strip fault changed again
	// with these credentials (SigV4): the client's signature covers the
	// headers stripped, and the backend would refuse it.
	ResignS3 *S3Credentials
}

// S3Credentials are what ResignS3 signs with.
type S3Credentials struct {
	AccessKey, Secret, Region string
}

// Proxy is a fault-injecting reverse proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	srv    *httptest.Server
	target *url.URL
	tr     *http.Transport
	closed chan struct{}

	mu    sync.Mutex
	rules []*Injection

	requests atomic.Int64
	byKind   [numKinds]atomic.Int64
	// conns counts the client connections open to the proxy.
	conns atomic.Int64
}

// faultKey carries a Slow fault to the response side.
type faultKey struct{}

// Start starts a proxy in front of target, a base URL such as
// http://127.0.0.1:7070. Close stops it.
func Start(target string, opts Options) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not an absolute http URL", target)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	p := &Proxy{target: u, tr: tr, closed: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			if opts.PreserveHost {
				pr.Out.Host = pr.In.Host
			}
			if f, ok := pr.In.Context().Value(faultKey{}).(Fault); ok && f.Kind == Strip && opts.ResignS3 != nil {
				resignS3(pr.Out, opts.ResignS3)
			}
		},
		Transport:      tr,
		ModifyResponse: p.modifyResponse,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The client went away (a test cancelled an upload), or the
			// backend failed: answer as a gateway would, quietly.
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serve(w, r, rp)
	}))
	p.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			p.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			p.conns.Add(-1)
		}
	}
	p.srv.Start()
	return p, nil
}

// New starts a proxy in front of target and closes it when the test ends.
func New(t testing.TB, target string, opts Options) *Proxy {
	t.Helper()
	p, err := Start(target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's base URL, http://127.0.0.1:port.
func (p *Proxy) URL() string { return p.srv.URL }

// Host is the proxy's host:port.
func (p *Proxy) Host() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// Requests is how many requests reached the proxy.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// OpenConns is how many client connections are open to the proxy, idle
// keep-alive ones included.
func (p *Proxy) OpenConns() int64 { return p.conns.Load() }

// Injected is how many faults of kind k the proxy injected, over all rules.
func (p *Proxy) Injected(k Kind) int64 {
	if k <= 0 || k >= numKinds {
		return 0
	}
	return p.byKind[k].Load()
}

// Inject installs a rule after those already installed. A request gets at
// most one fault: that of the first rule that picks it.
func (p *Proxy) Inject(r Rule) *Injection {
	in := &Injection{rule: r, p: p, release: make(chan struct{})}
	p.mu.Lock()
	p.rules = append(p.rules, in)
	p.mu.Unlock()
	return in
}

// Close releases every stalled request, stops the proxy and waits for the
// requests in flight.
func (p *Proxy) Close() {
	select {
	case <-p.closed:
		return
	default:
	}
	close(p.closed)
	p.srv.Close()
	p.tr.CloseIdleConnections()
}

func (p *Proxy) pick(r *http.Request) *Injection {
	p.mu.Lock()
	rules := append([]*Injection(nil), p.rules...)
	p.mu.Unlock()
	for _, in := range rules {
		if in.rule.Match != nil && !in.rule.Match(r) {
			continue
		}
		if in.pick() {
			return in
		}
	}
	return nil
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	p.requests.Add(1)
	in := p.pick(r)
	if in == nil {
		rp.ServeHTTP(w, r)
		return
	}
	f := in.rule.Fault
	p.byKind[f.Kind].Add(1)
	switch f.Kind {
	case Error:
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range f.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(f.Body)))
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Body)
	case Stall:
		in.held.Add(1)
		select {
		case <-in.release:
		case <-p.closed:
		case <-r.Context().Done():
		}
		in.held.Add(-1)
		rp.ServeHTTP(w, r)
	case Reset:
		_, _ = io.CopyN(io.Discard, r.Body, f.ResetAfter)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			// Not reachable over HTTP/1.1; say so rather than pass.
			http.Error(w, "faultproxy: hijack: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close with RST, not FIN
		}
		_ = conn.Close()
	case Strip:
		r = r.WithContext(context.WithValue(r.Context(), faultKey{}, f))
		for _, h := range f.Strip {
			r.Header.Del(h)
		}
		rp.ServeHTTP(w, r)
	case Slow:
		// The body is still being read, slowly, when the backend's answer
		// starts coming back: without full duplex, net/http closes the
		// request body at the first response write, and the proxy cuts
		// the exchange short.
		_ = http.NewResponseController(w).EnableFullDuplex()
		r.Body = &slowBody{ReadCloser: r.Body, ctx: r.Context(), bps: f.BytesPerSecond}
		r = r.WithContext(context.WithValue(r.Context(), faultKey{}, f))
		rp.ServeHTTP(w, r)
	default:
		http.Error(w, "faultproxy: unknown fault kind "+f.Kind.String(), http.StatusInternalServerError)
	}
}

// modifyResponse throttles the body of a Slow response, and points the
// Location of a resumable upload (fake-gcs-server answers with its own
// address) back at the proxy, so that the chunks go through it too.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	if loc := resp.Header.Get("Location"); loc != "" {
		base := p.target.Scheme + "://" + p.target.Host
		if rest, ok := strings.CutPrefix(loc, base); ok {
			resp.Header.Set("Location", p.srv.URL+rest)
		}
	}
	if f, ok := resp.Request.Context().Value(faultKey{}).(Fault); ok && f.Kind == Slow {
		resp.Body = &slowBody{ReadCloser: resp.Body, ctx: resp.Request.Context(), bps: f.BytesPerSecond}
	}
	return nil
}

// resignS3 replaces r's SigV4 signature with one over the headers it has
// now. The payload hash is the one the client declared (a hash, or
// UNSIGNED-PAYLOAD): the body is not changed. A failure leaves the old
// signature, which the backend refuses: the test sees it.
func resignS3(r *http.Request, c *S3Credentials) {
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if hash == "" {
		return
	}
	r.Header.Del("Authorization")
	creds := aws.Credentials{AccessKeyID: c.AccessKey, SecretAccessKey: c.Secret}
	// S3 paths are signed as they are sent, not escaped twice.
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	_ = signer.SignHTTP(r.Context(), creds, r, hash, "s3", c.Region, time.Now())
}

// slowBody reads at most bps bytes per second, in pieces of a twentieth
// of a second so that the rate is smooth.
type slowBody struct {
	io.ReadCloser
	ctx context.Context
	bps int64
}

func (s *slowBody) Read(b []byte) (int, error) {
	if s.bps <= 0 {
		return s.ReadCloser.Read(b)
	}
	if piece := int(max(s.bps/20, 1)); len(b) > piece {
		b = b[:piece]
	}
	n, err := s.ReadCloser.Read(b)
	if n > 0 {
		t := time.NewTimer(time.Duration(int64(n) * int64(time.Second) / s.bps))
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return n, errors.Join(err, s.ctx.Err())
		}
	}
	return n, err
}

// PartUploads matches the requests that carry one part of a multipart or
// resumable upload: S3 UploadPart (PUT ?partNumber&uploadId), a GCS
// resumable-upload chunk (PUT or POST ?upload_id) and an Azure Put Block (PUT
// ?comp=block).
func PartUploads(r *http.Request) bool {
	q := r.URL.Query()
	switch r.Method {
	case http.MethodPut:
		return (q.Has("partNumber") && q.Has("uploadId")) || q.Has("upload_id") || q.Get("comp") == "block"
	case http.MethodPost:
		// Google's client sends resumable chunks with POST.
		return q.Has("upload_id")
	}
	return false
}

// Conditional matches the requests that carry If-None-Match: a create-only
// write (S3 PutObject or CompleteMultipartUpload, an Azure block list
// commit).
func Conditional(r *http.Request) bool { return r.Header.Get("If-None-Match") != "" }

// DropIfNoneMatch is the rule of an S3-compatible store without
// conditional writes: every create-only write reaches the backend without
// its If-None-Match, and replaces whatever is under its name. S3 needs
// Options.ResignS3 with it.
func DropIfNoneMatch() Rule {
	return Rule{Match: Conditional, Fault: Fault{Kind: Strip, Strip: []string{"If-None-Match"}}}
}

// Writes matches every request that changes the store: PUT, POST and
// DELETE, which covers starting, sending and completing uploads.
func Writes(r *http.Request) bool {
	switch r.Method {
	case http.MethodPut, http.MethodPost, http.MethodDelete:
		return true
	}
	return false
}

// S3SlowDown is S3's throttling answer.
func S3SlowDown() Fault {
	return xmlError(http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.", nil)
}

// S3InternalError is S3's answer to a failure of its own.
func S3InternalError() Fault {
	return xmlError(http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.", nil)
}

// AzureServerBusy is Azure Storage's throttling answer.
func AzureServerBusy() Fault {
	return xmlError(http.StatusServiceUnavailable, "ServerBusy", "Operations per second is over the account limit.",
		http.Header{"X-Ms-Error-Code": {"ServerBusy"}})
}

// AzureInternalError is Azure Storage's answer to a failure of its own.
func AzureInternalError() Fault {
	return xmlError(http.StatusInternalServerError, "InternalError", "The server encountered an internal error. Please retry the request.",
		http.Header{"X-Ms-Error-Code": {"InternalError"}})
}

// GCSRateLimited is Cloud Storage's throttling answer (429).
func GCSRateLimited() Fault {
	return jsonError(http.StatusTooManyRequests, "rateLimitExceeded", "The rate of change requests to the object is too high.")
}

// GCSBackendError is Cloud Storage's 503.
func GCSBackendError() Fault {
	return jsonError(http.StatusServiceUnavailable, "backendError", "Backend Error")
}

func xmlError(status int, code, msg string, h http.Header) Fault {
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/xml")
	return Fault{Kind: Error, Status: status, Header: h,
		Body: `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
			`<Error><Code>` + code + `</Code><Message>` + msg + `</Message><RequestId>faultproxy</RequestId></Error>`}
}

func jsonError(status int, reason, msg string) Fault {
	return Fault{Kind: Error, Status: status, Header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}},
		Body: fmt.Sprintf(`{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`, status, msg, msg, reason)}
}
