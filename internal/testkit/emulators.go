package testkit

import (
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
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
// A bucket Spillway opens closes its own when it is closed (package
// remote's conns); the clients it does not make (iceberg-go's file IO, a
// test's own SDK client) keep theirs in pools no one can reach, so this
// closes http.DefaultTransport's idle connections and waits for the
// servers to close the others: versitygw keeps none, and scripts/test.sh
// starts Azurite with a 1 s keep-alive timeout.
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

// TCPPeers lists the remote addresses of this process's established TCP
// connections (from /proc; none elsewhere), for a test binary to print
// when goleak finds an HTTP connection's goroutines: the port names the
// server, and so the client that kept it.
func TCPPeers() []string {
	mine := map[string]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if in, ok := strings.CutPrefix(l, "socket:["); ok {
				mine[strings.TrimSuffix(in, "]")] = true
			}
		}
	}
	var peers []string
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "01" || !mine[fields[9]] {
				continue
			}
			peers = append(peers, procAddr(fields[1])+" -> "+procAddr(fields[2]))
		}
	}
	return peers
}

// procAddr decodes /proc/net/tcp's address (hex IP in host byte order,
// ":" hex port).
func procAddr(s string) string {
	ipHex, portHex, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(portHex, 16, 16)
	raw, err2 := hex.DecodeString(ipHex)
	if !ok || err != nil || err2 != nil || len(raw)%4 != 0 {
		return s
	}
	// Each 32-bit word is little-endian.
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.JoinHostPort(net.IP(raw).String(), strconv.FormatUint(port, 10))
}
