package config

import (
	"fmt"
	"testing"
)

// TestIcebergFilesHoldThePartition: with iceberg.table and an envelope,
// format.fields gains partition (once, also when the loaded config is
// loaded again from its own YAML); without a table, or with
// format.envelope: false, the list stays as given.
func TestIcebergFilesHoldThePartition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"format: {type: parquet}\niceberg: {table: kafka.events}\n", "[key value offset timestamp headers partition]"},
		{"format: {type: parquet, fields: [value, offset]}\niceberg: {table: kafka.events}\n", "[value offset partition]"},
		{"format: {type: parquet, fields: [partition, value]}\niceberg: {table: kafka.events}\n", "[partition value]"},
		{"format: {type: parquet}\n", "[key value offset timestamp headers]"},
		{"format: {type: parquet, fields: [value], envelope: false}\niceberg: {table: kafka.events}\n", "[value]"},
	} {
		c, err := LoadBytes([]byte(tc.yaml), baseEnv)
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := fmt.Sprint(c.Format.Fields); got != tc.want {
			t.Errorf("%s: format.fields %s, want %s", tc.yaml, got, tc.want)
		}
		out, err := c.YAML()
		if err != nil {
			t.Fatal(err)
		}
		again, err := LoadBytes(out, baseEnv)
		if err != nil {
			t.Fatalf("%s: reloading its YAML: %v", tc.yaml, err)
		}
		if got := fmt.Sprint(again.Format.Fields); got != tc.want {
			t.Errorf("%s: reloaded, format.fields %s, want %s", tc.yaml, got, tc.want)
		}
	}
}
