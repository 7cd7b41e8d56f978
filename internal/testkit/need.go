package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Need skips t when missing is not nil: a tool, emulator or variable the
// test needs is not there (missing says which, and how to get it). When
// the test script promised everything (SPILLWAY_TEST_REQUIRE_TOOLS=1), it
// fails t instead, so that CI can't pass by skipping.
func Need(t testing.TB, missing error) {
	t.Helper()
	if missing == nil {
		return
	}
	if os.Getenv(RequireToolsEnv) == "1" {
		t.Fatalf("%v, but %s=1: scripts/test.sh should have provided it", missing, RequireToolsEnv)
	}
	t.Skip(missing)
}

// NeedEnv returns the value of the environment variable name, which says
// where a tool or emulator is; unset, it is missing for Need.
func NeedEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Need(t, fmt.Errorf("%s is not set: run scripts/test.sh, which installs and starts the emulator", name))
	}
	return v
}

// Eventually waits until cond holds, checking it every 10ms, and fails t
// when it still doesn't after two minutes: a bound for a test that waits
// on an event, far beyond what a busy machine takes, not a timing.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RequireToolsEnv is the environment variable that turns a missing test tool
// (kcat) from a skip into a failure. scripts/test.sh sets it to 1, after
// installing the tools.
const RequireToolsEnv = "SPILLWAY_TEST_REQUIRE_TOOLS"

// MissingTool skips the test, or fails it under SPILLWAY_TEST_REQUIRE_TOOLS=1.
func MissingTool(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(RequireToolsEnv) == "1" {
		t.Fatalf("%s and %s=1; run ./scripts/test.sh, which installs it", why, RequireToolsEnv)
	}
	t.Skipf("%s; run ./scripts/test.sh, which installs it", why)
}

// FindRepoRoot is the nearest directory above the working directory (a test's
// package directory) that holds go.mod.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory, so .cache/duckdb can't be found")
		}
		dir = parent
	}
}
