package aiven

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/connect"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// inputs are the example configs in testdata, written from each product's
// documentation.
func inputs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"*.json", "*.properties"} {
		m, err := filepath.Glob(filepath.Join("testdata", pat))
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

// TestGolden imports each example and compares the YAML with the golden
// file beside it; the YAML must load and validate as `config check` does.
func TestGolden(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := connect.Import(in, data, "", Sinks())
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(in, filepath.Ext(in)) + ".yaml"
			if *update {
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

// TestWarnings: each line that changes what is stored is a warning that
// names the connector's key, and the converters that would lose records
// are mapped or made to fail loudly (issue #22, case 5).
func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     []string // substrings of one warning each
		yaml     []string // substrings of the YAML
		notYAML  []string
		noWarnOf []string
	}{{
		in:   "aiven-parquet-avro.json",
		want: []string{"errors.tolerance=all: Spillway skips"},
		yaml: []string{"url: 'https://karapace.example:28419'", "decode: both\n", "username: avnadmin\n", "schema_registry.tls.ca_file"},
	}, {
		in:       "aiven-parquet-bytes.properties",
		yaml:     []string{"value_encoding: base64"},
		noWarnOf: []string{"converter"},
	}, {
		in:      "aiven-long-converter.properties",
		want:    []string{"errors.tolerance=all is not imported: value.converter=org.apache.kafka.connect.converters.LongConverter can't be mapped", "LongConverter: no Spillway mapping"},
		yaml:    []string{"tolerance: none\n"},
		notYAML: []string{"\n  tolerance: all"},
	}} {
		t.Run(tc.in, func(t *testing.T) {
			in := filepath.Join("testdata", tc.in)
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := connect.Import(in, data, "", Sinks())
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(res.Warnings, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("no warning says %q; warnings:\n%s", w, all)
				}
			}
			for _, w := range tc.noWarnOf {
				if strings.Contains(all, w) {
					t.Errorf("a warning says %q; warnings:\n%s", w, all)
				}
			}
			for _, y := range tc.yaml {
				if !strings.Contains(string(res.YAML), y) {
					t.Errorf("the YAML has no %q:\n%s", y, res.YAML)
				}
			}
			for _, y := range tc.notYAML {
				if strings.Contains(string(res.YAML), y) {
					t.Errorf("the YAML has %q:\n%s", y, res.YAML)
				}
			}
		})
	}
}
