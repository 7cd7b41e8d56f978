package testkit

import (
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// AzureConnField returns one field (BlobEndpoint, AccountKey, ...) of an
// Azure storage connection string, or "".
func AzureConnField(conn, name string) string {
	v := ""
	for part := range strings.SplitSeq(conn, ";") {
		if s, ok := strings.CutPrefix(part, name+"="); ok {
			v = s
		}
	}
	return v
}

// AzureBlobEndpoint returns the BlobEndpoint of an Azure connection string,
// as written and parsed, failing the test when it has none.
func AzureBlobEndpoint(t testing.TB, conn string) (string, *url.URL) {
	t.Helper()
	endpoint := AzureConnField(conn, "BlobEndpoint")
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("the Azure connection string has no usable BlobEndpoint (%q)", endpoint)
	}
	return endpoint, u
}

// WaitIdleConns waits, when t ends, until the HTTP keep-alive connections
// of the storage clients are closed, so that goleak sees no goroutine left.
// The GCS client uses http.DefaultClient, whose idle connections are closed
// here; the S3 and Azure SDKs keep their transports private, so this waits
// for the servers to close them: versitygw keeps none, and
// scripts/test.sh starts Azurite with a 1 s keep-alive timeout.
func WaitIdleConns(t testing.TB) {
	t.Cleanup(func() {
		deadline := time.Now().Add(15 * time.Second)
		for {
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			if !strings.Contains(stacks, "net/http.(*persistConn).readLoop") || time.Now().After(deadline) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
