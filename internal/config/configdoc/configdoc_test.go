package configdoc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// updateGoldenEnv rewrites docs/config.md when set to 1, as it rewrites
// every golden file.
const updateGoldenEnv = testkit.UpdateGoldenEnv

// TestConfigDoc regenerates docs/config.md from the key table and fails when
// the file in the tree differs, so the reference can't drift from the keys
// the config accepts.
func TestConfigDoc(t *testing.T) {
	want, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "..", Path)
	if os.Getenv(updateGoldenEnv) == "1" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with %s=1 go test -run TestConfigDoc ./internal/config/configdoc)", err, updateGoldenEnv)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
			line++
		}
		at := func(l []string) string {
			if line < len(l) {
				return l[line]
			}
			return "(end of file)"
		}
		t.Errorf("%s is not what the key table generates: it is edited by hand, or a key, default or text in internal/config/configdoc/configdoc.go changed.\n"+
			"Change the text in configdoc.go, not the file, then regenerate it with\n"+
			"  %s=1 go test -run TestConfigDoc ./internal/config/configdoc\n"+
			"and review the diff. First difference, line %d:\n  file:      %s\n  generated: %s",
			Path, updateGoldenEnv, line+1, at(gl), at(wl))
	}
}

// TestConfigDocCoversEveryKey: every key the config accepts has a row, so a
// field added to Config without text in keyDocs fails here by name.
func TestConfigDocCoversEveryKey(t *testing.T) {
	doc, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range config.Keys() {
		if !bytes.Contains(doc, []byte("| `"+k.Key+"`")) || !bytes.Contains(doc, []byte("`"+k.Env+"`")) {
			t.Errorf("docs/config.md has no row for %s (%s)", k.Key, k.Env)
		}
	}
}
