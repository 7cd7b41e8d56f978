package deploytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// repoRoot is Spillway's repository, two levels up from this module.
const repoRoot = "../.."

// testVersion is what the release build is stamped with here.
const testVersion = "v0.0.0-deploytest"

// release is the binary built by scripts/build-static.sh, the Dockerfile's
// build command, once for every test; buildErr says why there is none.
// TestMain sets both before any test runs, and nothing changes them after.
var release, buildErr = "", error(nil)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "spillway-deploytest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	release, buildErr = buildRelease(filepath.Join(dir, "spillway"), testVersion)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildRelease runs the release build, as the Dockerfile's build stage
// does, into out.
func buildRelease(out, version string) (string, error) {
	cmd := exec.Command("sh", "./scripts/build-static.sh", out, version)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("scripts/build-static.sh: %w\n%s", err, b)
	}
	return out, nil
}

// releaseBinary is the path of the release binary, or fails t.
func releaseBinary(t *testing.T) string {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return release
}
