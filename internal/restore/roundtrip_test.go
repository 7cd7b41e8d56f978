package restore

import (
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// TestRoundTrip drains hostile records through the sink in each format,
// restores them into a new topic, and reads that topic read_committed:
// every record, partition by partition and in order, byte for byte.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1)
	for _, tc := range []struct{ name, typ, compression, encoding string }{
		{"jsonl-gzip", "jsonl", "gzip", "base64"},
		{"json-zstd", "json", "zstd", "base64"},
		{"avro-snappy", "avro", "snappy", "base64"},
		{"parquet-zstd", "parquet", "zstd", "base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newSource(t, cluster, "src-"+tc.name, 3, 291, func(c *config.Config) {
				c.Format.Type, c.Format.Compression, c.Format.ValueEncoding = tc.typ, tc.compression, tc.encoding
			})
			dst := "dst-" + tc.name
			createTopic(t, f.cl, dst, 4)
			res, err := f.restoreTo(t, dst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Records != 873 {
				t.Errorf("restored %d records, want 873", res.Records)
			}
			compare(t, f.want, readCommitted(t, cluster, dst, 4))
		})
	}
}
