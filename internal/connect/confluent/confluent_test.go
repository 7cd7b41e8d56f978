package confluent

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
		in: "confluent-avro-registry.properties",
		want: []string{
			"errors.tolerance=all: Spillway skips every record it can't write",
			"sent to orders-dlq",
			"rotate.interval.ms and rotate.schedule.interval.ms are not set",
		},
		yaml: []string{
			"schema_registry:\n", "url: 'https://psrc-abc.eu-central-1.aws.confluent.cloud'", "decode: value  #",
			"username: SRKEY123\n", "SPILLWAY_SCHEMA_REGISTRY_PASSWORD", "\n  tolerance: all\n", "dead_letter_topic: orders-dlq",
			"max_age: 24h0m0s", "type: avro", "value_encoding: none",
		},
		notYAML: []string{"s3cr3t-pw", "max_age: 5m"},
	}, {
		in:   "confluent-json-envelope.json",
		want: []string{"value.converter=org.apache.kafka.connect.json.JsonConverter (value.converter.schemas.enable not set: true, JsonConverter's default): the records hold {\"schema\":...,\"payload\":...}; Confluent stores the payload, Spillway stores the whole envelope"},
		yaml: []string{"NOT THE SAME: Confluent writes the payload"},
	}, {
		in: "confluent-protobuf-unresolved.properties",
		want: []string{
			"errors.tolerance=all is not imported: value.converter=io.confluent.connect.protobuf.ProtobufConverter (its registry is not known)",
			"errors.tolerance: none and no dead-letter topic",
			"the schema registry's URL is not known",
			"Spillway maps each Protobuf schema onto parquet columns its own way",
		},
		yaml:    []string{"tolerance: none\n", "SET THIS: value.converter.schema.registry.url is a Connect config provider reference", "decode: value"},
		notYAML: []string{"dead_letter_topic:", "\n  tolerance: all"},
	}, {
		in:   "confluent-s3.properties",
		want: []string{"value.converter (not set): the Connect worker's converter applies", "rotate.interval.ms and rotate.schedule.interval.ms are not set"},
		yaml: []string{"max_age: 24h0m0s"},
	}, {
		in:   "confluent-parquet.json",
		want: []string{"transforms=route: Spillway has no Single Message Transforms", "schema.compatibility=BACKWARD"},
		yaml: []string{"url: 'http://schema-registry:8081'", "decode: value"},
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
