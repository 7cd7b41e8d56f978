package restore

import (
	"errors"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/config"
)

// TestCheckRefuses: each config whose files can't give records back whole
// is refused, naming the key; the ones that can pass.
func TestCheckRefuses(t *testing.T) {
	t.Parallel()
	base := func() *config.Config {
		c := config.Default()
		c.Format.Type, c.Format.ValueEncoding = "jsonl", "base64"
		c.Format.Fields = []string{"key", "value", "offset", "timestamp", "headers"}
		c.Format.Envelope = true
		return c
	}
	for _, tc := range []struct {
		name string
		fn   func(*config.Config)
		key  string // "" = accepted
	}{
		{"jsonl base64", func(c *config.Config) {}, ""},
		{"json base64", func(c *config.Config) { c.Format.Type = "json" }, ""},
		{"avro base64", func(c *config.Config) { c.Format.Type = "avro" }, ""},
		{"avro text", func(c *config.Config) { c.Format.Type, c.Format.ValueEncoding = "avro", "none" }, ""},
		{"parquet text", func(c *config.Config) { c.Format.Type, c.Format.ValueEncoding = "parquet", "none" }, ""},
		{"fields subset", func(c *config.Config) { c.Format.Fields = []string{"key", "value", "offset", "timestamp"} }, "format.fields"},
		{"value only", func(c *config.Config) { c.Format.Fields = []string{"value"} }, "format.fields"},
		{"no envelope", func(c *config.Config) { c.Format.Envelope = false }, "format.envelope"},
		{"jsonl text", func(c *config.Config) { c.Format.ValueEncoding = "none" }, "format.value_encoding"},
		{"json default encoding", func(c *config.Config) { c.Format.Type, c.Format.ValueEncoding = "json", "" }, "format.value_encoding"},
		{"csv", func(c *config.Config) { c.Format.Type = "csv" }, "format.type"},
		{"bytes", func(c *config.Config) { c.Format.Type = "bytes" }, "format.type"},
		{"registry", func(c *config.Config) { c.Format.Type, c.SchemaRegistry.URL = "avro", "http://registry:8081" }, "schema_registry.url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := base()
			tc.fn(c)
			err := Check(c)
			if tc.key == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("got %v, want a refusal naming %s", err, tc.key)
			}
		})
	}
}
