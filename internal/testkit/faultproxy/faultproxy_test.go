package faultproxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is an origin that echoes what it received and counts requests.
func backend(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/redirect" {
			w.Header().Set("Location", "http://"+r.Host+"/upload?upload_id=1")
		}
		w.Header().Set("X-Host", r.Host)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

func put(t *testing.T, c *http.Client, url string, body []byte) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp, got, err
}

func TestErrorEveryNthWithLimit(t *testing.T) {
	be, hits := backend(t)
	p := New(t, be.URL, Options{})
	c := client(t)
	in := p.Inject(Rule{Match: PartUploads, Every: 2, Limit: 2, Fault: S3SlowDown()})
	var statuses []int
	for range 6 {
		resp, body, err := put(t, c, p.URL()+"/b/k?partNumber=1&uploadId=x", []byte("part"))
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == 503 && !strings.Contains(string(body), "<Code>SlowDown</Code>") {
			t.Errorf("503 body = %q, want S3's SlowDown", body)
		}
	}
	want := []int{200, 503, 200, 503, 200, 200}
	if !slices.Equal(statuses, want) {
		t.Errorf("statuses = %v, want %v", statuses, want)
	}
	if in.Count() != 2 || p.Injected(Error) != 2 || hits.Load() != 4 {
		t.Errorf("rule count %d, proxy errors %d, backend hits %d; want 2, 2, 4", in.Count(), p.Injected(Error), hits.Load())
	}
	// A request the rule does not match passes.
	if resp, _, err := put(t, c, p.URL()+"/b/k", []byte("whole")); err != nil || resp.StatusCode != 200 {
		t.Errorf("PutObject through the proxy: %v, %v", resp, err)
	}
}

func TestStallUntilRelease(t *testing.T) {
	be, hits := backend(t)
	p := New(t, be.URL, Options{})
	c := client(t)
	in := p.Inject(Rule{Fault: Fault{Kind: Stall}})
	done := make(chan error, 1)
	go func() {
		_, body, err := put(t, c, p.URL()+"/x", []byte("held"))
		if err == nil && string(body) != "held" {
			err = io.ErrUnexpectedEOF
		}
		done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for in.Held() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the request was never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("a stalled request finished before release: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if hits.Load() != 0 {
		t.Fatal("a stalled request reached the backend")
	}
	in.Release()
	if err := <-done; err != nil {
		t.Fatalf("after release: %v", err)
	}
	if in.Count() != 1 || p.Injected(Stall) != 1 {
		t.Errorf("stalls counted %d/%d, want 1", in.Count(), p.Injected(Stall))
	}
}

// TestCloseReleasesStalls: a test that ends while a request is held does
// not hang in Close.
func TestCloseReleasesStalls(t *testing.T) {
	be, _ := backend(t)
	p, err := Start(be.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)
	in := p.Inject(Rule{Fault: Fault{Kind: Stall}})
	done := make(chan struct{})
	go func() { defer close(done); _, _, _ = put(t, c, p.URL()+"/x", []byte("held")) }()
	for in.Held() != 1 {
		time.Sleep(5 * time.Millisecond)
	}
	p.Close()
	<-done
}

func TestResetMidBody(t *testing.T) {
	be, hits := backend(t)
	p := New(t, be.URL, Options{})
	c := client(t)
	p.Inject(Rule{Match: Writes, Limit: 1, Fault: Fault{Kind: Reset, ResetAfter: 100 << 10}})
	_, _, err := put(t, c, p.URL()+"/x", make([]byte, 1<<20))
	if err == nil {
		t.Fatal("a reset request succeeded")
	}
	t.Logf("client saw: %v", err)
	if hits.Load() != 0 {
		t.Error("a reset request reached the backend")
	}
	if p.Injected(Reset) != 1 {
		t.Errorf("resets counted %d, want 1", p.Injected(Reset))
	}
	// The limit is reached: the next one passes.
	if resp, _, err := put(t, c, p.URL()+"/x", []byte("ok")); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the reset: %v, %v", resp, err)
	}
}

func TestSlowDeliversEverything(t *testing.T) {
	be, _ := backend(t)
	p := New(t, be.URL, Options{})
	c := client(t)
	in := p.Inject(Rule{Fault: Fault{Kind: Slow, BytesPerSecond: 1 << 20}})
	data := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	start := time.Now()
	_, got, err := put(t, c, p.URL()+"/x", data)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("slow echo: %d bytes back, err %v", len(got), err)
	}
	// Body up and back at 1 MiB/s is at least half a second; only a lower
	// bound is asserted, the machine may be slower still.
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("256 KiB each way at 1 MiB/s took %v: not throttled", d)
	}
	if in.Count() != 1 {
		t.Errorf("slow faults counted %d, want 1", in.Count())
	}
}

func TestHostAndLocation(t *testing.T) {
	be, _ := backend(t)
	ctx := context.Background()
	for _, preserve := range []bool{false, true} {
		p := New(t, be.URL, Options{PreserveHost: preserve})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/redirect", nil)
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		wantHost := strings.TrimPrefix(be.URL, "http://")
		if preserve {
			wantHost = p.Host()
		}
		if got := resp.Header.Get("X-Host"); got != wantHost {
			t.Errorf("PreserveHost=%v: backend saw Host %q, want %q", preserve, got, wantHost)
		}
		if got, want := resp.Header.Get("Location"), p.URL()+"/upload?upload_id=1"; !preserve && got != want {
			t.Errorf("Location = %q, want %q (pointing at the proxy)", got, want)
		}
	}
}

// TestStripIfNoneMatch: DropIfNoneMatch removes the header from the
// requests that carry it, counts them, and leaves the others alone; with
// ResignS3 the request reaches the backend signed again, without the
// header among the signed ones.
func TestStripIfNoneMatch(t *testing.T) {
	var seen, auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("If-None-Match"))
		auth.Store(r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	p := New(t, srv.URL, Options{ResignS3: &S3Credentials{AccessKey: "k", Secret: "s", Region: "us-east-1"}})
	in := p.Inject(DropIfNoneMatch())
	c := client(t)
	send := func(inm string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, p.URL()+"/bucket/key", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;if-none-match, Signature=0")
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("*")
	if got := seen.Load().(string); got != "" {
		t.Errorf("backend saw If-None-Match %q, want none", got)
	}
	if a := auth.Load().(string); strings.Contains(a, "if-none-match") || !strings.Contains(a, "SignedHeaders=") {
		t.Errorf("not signed again without the header: %s", a)
	}
	send("")
	if in.Count() != 1 || p.Injected(Strip) != 1 {
		t.Errorf("stripped %d (proxy: %d), want 1: only the request that carried the header", in.Count(), p.Injected(Strip))
	}
}
