package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Chromium is where Debian's chromium package installs the browser.
const Chromium = "/usr/bin/chromium"

// playwrightDir is where scripts/test.sh installs playwright-core (the
// driver only: the browser is Debian's), relative to the repository root.
const playwrightDir = ".cache/playwright"

// Playwright finds node and the playwright-core package, and checks that
// Chromium is installed. It returns node and the node_modules directory
// that holds playwright-core. When any is missing the test is skipped, or
// fails if SPILLWAY_TEST_REQUIRE_TOOLS=1.
func Playwright(t testing.TB) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		MissingTool(t, fmt.Sprintf("node is not installed (%v)", err))
		return "", ""
	}
	if _, err := os.Stat(Chromium); err != nil {
		MissingTool(t, fmt.Sprintf("chromium is not installed at %s", Chromium))
		return "", ""
	}
	root, err := FindRepoRoot()
	if err != nil {
		MissingTool(t, err.Error())
		return "", ""
	}
	modules = filepath.Join(root, playwrightDir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "playwright-core", "package.json")); err != nil {
		MissingTool(t, fmt.Sprintf("playwright-core is not installed in %s", filepath.Join(root, playwrightDir)))
		return "", ""
	}
	return node, modules
}

// RepoRoot is the repository's root directory (the nearest above the
// test's package directory that holds go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
