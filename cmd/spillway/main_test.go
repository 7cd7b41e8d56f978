package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/testkit"
)

// binPath is the spillway binary built once by TestMain for the binary
// tests; binErr says why there is none.
var (
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	flag.Parse() // testing.Short needs parsed flags
	dir := ""
	if testing.Short() {
		binErr = fmt.Errorf("binary not built under -short")
	} else {
		var err error
		dir, err = os.MkdirTemp("", "spillway-cli-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "TestMain:", err)
			os.Exit(1)
		}
		binPath, binErr = buildBinary(dir)
	}
	goleak.VerifyTestMain(closingIdle{m}, goleak.Cleanup(func(code int) {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		os.Exit(code)
	}))
}

// closingIdle runs the tests, then closes the idle keep-alive connections
// of http.DefaultTransport before goleak looks: clients that use it (the
// GCS client with credentials, the tests' own GETs) keep a connection's
// two goroutines for as long as the server keeps it open. Buckets close
// their own connections. Two rehearsals failed on such a pair, idle for a
// minute at the package's end, whose client was not found: should goleak
// find one again, the connections still open are printed, with the
// server's port.
type closingIdle struct{ m *testing.M }

func (c closingIdle) Run() int {
	code := c.m.Run()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "goleak will fail; TCP connections still open: %q\n", testkit.TCPPeers())
	}
	return code
}

// buildBinary builds ./cmd/spillway (this package) into dir, with the race
// detector when the tests themselves run with it.
func buildBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "spillway")
	if err := testkit.GoBuild(bin, ".", raceEnabled); err != nil {
		return "", err
	}
	return bin, nil
}

// spillwayBinary returns the built binary, or skips (under -short) or fails
// the test.
func spillwayBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("binary tests are skipped under -short")
	}
	if binErr != nil {
		t.Fatalf("spillway binary: %v", binErr)
	}
	return binPath
}
