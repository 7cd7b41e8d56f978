package aiven

import (
	"testing"

	"github.com/spillway/spillway/internal/connect/connecttest"
	"github.com/spillway/spillway/internal/testkit"
)

// TestGolden imports each example and compares the YAML with the golden
// file beside it; the YAML must load and validate as `config check` does.
func TestGolden(t *testing.T) {
	connecttest.Golden(t, Sinks(), testkit.UpdateGolden())
}

// TestWarnings: each line that changes what is stored is a warning that
// names the connector's key, and the converters that would lose records
// are mapped or made to fail loudly (issue #22, case 5).
func TestWarnings(t *testing.T) {
	connecttest.Warnings(t, Sinks(), []connecttest.Warning{{
		In:   "aiven-parquet-avro.json",
		Want: []string{"errors.tolerance=all: Spillway skips"},
		YAML: []string{"url: 'https://karapace.example:28419'", "decode: both\n", "username: avnadmin\n", "schema_registry.tls.ca_file"},
	}, {
		In:       "aiven-parquet-bytes.properties",
		YAML:     []string{"value_encoding: base64"},
		NoWarnOf: []string{"converter"},
	}, {
		In:      "aiven-long-converter.properties",
		Want:    []string{"errors.tolerance=all is not imported: value.converter=org.apache.kafka.connect.converters.LongConverter can't be mapped", "LongConverter: no Spillway mapping"},
		YAML:    []string{"tolerance: none\n"},
		NotYAML: []string{"\n  tolerance: all"},
	}})
}
