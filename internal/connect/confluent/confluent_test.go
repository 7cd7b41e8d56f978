package confluent

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
		In: "confluent-avro-registry.properties",
		Want: []string{
			"errors.tolerance=all: Spillway skips every record it can't write",
			"sent to orders-dlq",
			"rotate.interval.ms and rotate.schedule.interval.ms are not set",
		},
		YAML: []string{
			"schema_registry:\n", "url: 'https://psrc-abc.eu-central-1.aws.confluent.cloud'", "decode: value  #",
			"username: SRKEY123\n", "SPILLWAY_SCHEMA_REGISTRY_PASSWORD", "\n  tolerance: all\n", "dead_letter_topic: orders-dlq",
			"max_age: 24h0m0s", "type: avro", "value_encoding: none",
		},
		NotYAML: []string{"s3cr3t-pw", "max_age: 5m"},
	}, {
		In:   "confluent-json-envelope.json",
		Want: []string{"value.converter=org.apache.kafka.connect.json.JsonConverter (value.converter.schemas.enable not set: true, JsonConverter's default): the records hold {\"schema\":...,\"payload\":...}; Confluent stores the payload, Spillway stores the whole envelope"},
		YAML: []string{"NOT THE SAME: Confluent writes the payload"},
	}, {
		In: "confluent-protobuf-unresolved.properties",
		Want: []string{
			"errors.tolerance=all is not imported: value.converter=io.confluent.connect.protobuf.ProtobufConverter (its registry is not known)",
			"errors.tolerance: none and no dead-letter topic",
			"the schema registry's URL is not known",
			"Spillway maps each Protobuf schema onto parquet columns its own way",
		},
		YAML:    []string{"tolerance: none\n", "SET THIS: value.converter.schema.registry.url is a Connect config provider reference", "decode: value"},
		NotYAML: []string{"dead_letter_topic:", "\n  tolerance: all"},
	}, {
		In:   "confluent-s3.properties",
		Want: []string{"value.converter (not set): the Connect worker's converter applies", "rotate.interval.ms and rotate.schedule.interval.ms are not set"},
		YAML: []string{"max_age: 24h0m0s"},
	}, {
		In:   "confluent-parquet.json",
		Want: []string{"transforms=route: Spillway has no Single Message Transforms", "schema.compatibility=BACKWARD"},
		YAML: []string{"url: 'http://schema-registry:8081'", "decode: value"},
	}})
}
