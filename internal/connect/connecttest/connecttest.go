// Package connecttest holds the tests that each vendor package of connect
// (aiven, confluent) runs on its own examples: the golden-file loop and the
// warning checks. It is for tests only: nothing outside a _test.go file
// imports it.
//
// The -update flag stays in each vendor's test file, which passes its value
// in, so that `go test -run TestGolden -update` works there as before.
package connecttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/connect"
)

// Inputs are the example configs (*.json, *.properties) in the folders that
// dir matches, written from each product's documentation; fewer than six
// means the glob went astray.
func Inputs(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"*.json", "*.properties"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 6 {
		t.Fatalf("only %d example configs in testdata", len(out))
	}
	return out
}

// Golden imports each example in testdata with sinks and compares the YAML
// with the golden file beside it (rewriting it first if update is set); the
// YAML must load and validate as `config check` does.
func Golden(t *testing.T, sinks []connect.Sink, update bool) {
	t.Helper()
	for _, in := range Inputs(t, "testdata") {
		t.Run(filepath.Base(in), func(t *testing.T) {
			res := importFile(t, in, sinks)
			golden := strings.TrimSuffix(in, filepath.Ext(in)) + ".yaml"
			if update {
				if err := os.WriteFile(golden, res.YAML, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to write it)", err)
			}
			if string(res.YAML) != string(want) {
				t.Errorf("YAML differs from %s (run with -update and review the diff):\n%s", golden, res.YAML)
			}
			// Credentials come from the environment, as the YAML's
			// header says.
			if _, err := config.LoadBytes(res.YAML, credentialEnv(res.YAML)); err != nil {
				t.Errorf("the imported YAML is not a valid config: %v", err)
			}
		})
	}
}

// importFile imports the example in with sinks.
func importFile(t *testing.T, in string, sinks []connect.Sink) *connect.Result {
	t.Helper()
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := connect.Import(in, data, "", sinks)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// credentialEnv is what the header of an imported YAML asks to set.
func credentialEnv(yaml []byte) []string {
	var env []string
	for _, v := range []string{"SPILLWAY_KAFKA_SASL_PASSWORD", "SPILLWAY_SCHEMA_REGISTRY_PASSWORD"} {
		if strings.Contains(string(yaml), v) {
			env = append(env, v+"=x")
		}
	}
	return env
}

// Warning is one example of testdata and what its import must say.
type Warning struct {
	In       string   // the example's file name in testdata
	Want     []string // substrings of one warning each
	YAML     []string // substrings of the YAML
	NotYAML  []string
	NoWarnOf []string // substrings no warning may have
}

// Warnings imports each case's example with sinks, in a subtest named after
// the file, and checks its warnings and YAML.
func Warnings(t *testing.T, sinks []connect.Sink, cases []Warning) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.In, func(t *testing.T) {
			in := filepath.Join("testdata", tc.In)
			res := importFile(t, in, sinks)
			all := strings.Join(res.Warnings, "\n")
			for _, w := range tc.Want {
				if !strings.Contains(all, w) {
					t.Errorf("no warning says %q; warnings:\n%s", w, all)
				}
			}
			for _, w := range tc.NoWarnOf {
				if strings.Contains(all, w) {
					t.Errorf("a warning says %q; warnings:\n%s", w, all)
				}
			}
			for _, y := range tc.YAML {
				if !strings.Contains(string(res.YAML), y) {
					t.Errorf("the YAML has no %q:\n%s", y, res.YAML)
				}
			}
			for _, y := range tc.NotYAML {
				if strings.Contains(string(res.YAML), y) {
					t.Errorf("the YAML has %q:\n%s", y, res.YAML)
				}
			}
		})
	}
}
