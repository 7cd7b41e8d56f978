package restore

import (
	"testing"
	"time"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// TestKeyPartitionedLayout restores files written with {{key}} in the
// name template: a partition's records are spread over one open file per
// key, their offsets interleave, and restore merges them back into offset
// order.
func TestKeyPartitionedLayout(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1)
	f := newSource(t, cluster, "src-keys", 2, 291, func(c *config.Config) {
		c.Format.Type, c.Format.Compression = "jsonl", "gzip"
		c.File.NameTemplate = "{{topic}}/{{partition}}/key={{key}}/{{start_offset}}"
		// Files close by age, so that the null and empty keys' files
		// span the partition while the other keys' come and go.
		c.File.MaxRecords = 1 << 20
		c.File.MaxAge = time.Second
	})
	b := openBucket(t, f.cfg)
	plan, err := Plan(t.Context(), b, f.cfg.Storage.Prefix, map[string]string{f.topic: "dst-keys"}, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	widest := 0
	for _, g := range overlapping(plan[0].Files) {
		widest = max(widest, len(g))
	}
	if widest < 3 {
		t.Fatalf("partition 0's %d files interleave at most %d at a time: not a test", len(plan[0].Files), widest)
	}
	createTopic(t, f.cl, "dst-keys", 2)
	if _, err := f.restoreTo(t, "dst-keys", Options{TxnBytes: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	compare(t, f.want, readCommitted(t, cluster, "dst-keys", 2))
}
