package storage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeS3 answers PutObject: the first failures requests with status (and
// S3's error body for it), then 200. It records the requests' headers.
type fakeS3 struct {
	mu       sync.Mutex
	failures int
	status   int
	code     string
	puts     []http.Header
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPut {
		http.Error(w, "unexpected", http.StatusNotImplemented)
		return
	}
	f.mu.Lock()
	f.puts = append(f.puts, r.Header.Clone())
	fail := len(f.puts) <= f.failures
	f.mu.Unlock()
	if fail {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, f.code)
		return
	}
	w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	w.WriteHeader(http.StatusOK)
}

func (f *fakeS3) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.puts) }

// TestS3RetryClasses checks the retryer storage.Open gives the S3 client,
// against a fake endpoint: throttling and 5xx are retried up to
// MaxAttempts, 429 too, access denied is not; and the client rebuilt for
// it keeps the URL's options (ssetype).
func TestS3RetryClasses(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "fake")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fake")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	fast := Retry{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	for _, tc := range []struct {
		name     string
		failures int
		status   int
		code     string
		wantPuts int
		wantErr  bool
	}{
		{"slowdown then ok", 3, 503, "SlowDown", 4, false},
		{"429 then ok", 2, 429, "TooManyRequests", 3, false},
		{"500 then ok", 1, 500, "InternalError", 2, false},
		{"slowdown beyond max attempts", 100, 503, "SlowDown", 4, true},
		{"access denied is not retried", 100, 403, "AccessDenied", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeS3{failures: tc.failures, status: tc.status, code: tc.code}
			srv := httptest.NewServer(f)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := Open(ctx, "s3://bucket?endpoint="+srv.URL+"&use_path_style=true&region=us-east-1&ssetype=AES256",
				Options{PartSize: 5 << 20, Retry: fast})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			w, err := b.NewWriter(ctx, "k", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			err = w.Commit()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Commit: %v, want error: %v", err, tc.wantErr)
			}
			if got := f.count(); got != tc.wantPuts {
				t.Errorf("%d PutObject requests, want %d", got, tc.wantPuts)
			}
			f.mu.Lock()
			sse := f.puts[0].Get("X-Amz-Server-Side-Encryption")
			f.mu.Unlock()
			if sse != "AES256" {
				t.Errorf("PutObject's x-amz-server-side-encryption = %q, want AES256 from the URL's ssetype", sse)
			}
		})
	}
}
