package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
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
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		os.Exit(code)
	}))
}

// buildBinary builds ./cmd/spillway (this package) into dir, with the race
// detector when the tests themselves run with it.
func buildBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "spillway")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, ".")
	cmd := exec.Command("go", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, out)
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
