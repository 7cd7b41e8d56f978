package testkit

import (
	"fmt"
	"os"
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
