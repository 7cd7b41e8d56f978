package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGetenvNamesTheEndpoint: with Options.Getenv, a GCS or Azure client
// reaches the endpoint that Getenv gives (STORAGE_EMULATOR_HOST, or the
// connection string's BlobEndpoint), not one of the process environment:
// tests run pipelines against different fault proxies at once this way.
// The server only records what reaches it and answers 404.
func TestGetenvNamesTheEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		env       func(srv *url.URL) map[string]string
	}{
		{"gcs", "gs://getenv-bucket", func(srv *url.URL) map[string]string {
			return map[string]string{"STORAGE_EMULATOR_HOST": srv.Host}
		}},
		{"azure", "azblob://getenv-bucket", func(srv *url.URL) map[string]string {
			// Azurite's well-known development account (public).
			return map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
				"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
				"BlobEndpoint=" + srv.String() + "/devstoreaccount1;"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				mu    sync.Mutex
				paths []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.Path)
				mu.Unlock()
				http.NotFound(w, r)
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			su, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			env := tc.env(su)
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := Open(ctx, u, tc.url, Options{Retry: Retry{MaxAttempts: 1}, Getenv: func(k string) string { return env[k] }})
			if err != nil {
				t.Fatalf("open %s with Getenv %v: %v", tc.url, env, err)
			}
			defer b.b.Close()
			_, _ = b.b.Exists(ctx, "some/key") // 404: the answer doesn't matter, where it went does
			mu.Lock()
			defer mu.Unlock()
			found := false
			for _, p := range paths {
				found = found || strings.Contains(p, "getenv-bucket")
			}
			if !found {
				t.Errorf("the %s client did not reach the endpoint Getenv gave (%s): it saw %q", tc.name, srv.URL, paths)
			}
		})
	}
}
