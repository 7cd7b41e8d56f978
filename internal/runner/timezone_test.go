package runner

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// TestTimezoneNamesFiles: file.timezone reaches the template, so a record
// stamped 20:00 UTC on New Year's Eve is filed under 1 January in Kolkata
// (+05:30), not under 31 December.
func TestTimezoneNamesFiles(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	stamp := time.Date(2024, 12, 31, 20, 0, 0, 0, time.UTC)
	testkit.Produce(t, cl, "events", 100, func(i int) *kgo.Record {
		return &kgo.Record{Value: []byte(`{"i":1}`), Timestamp: stamp}
	})
	end := testkit.EndOffsets(t, cl, "events")

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.File.NameTemplate = "{{timestamp:unit=MM}}-{{timestamp:unit=dd}}T{{timestamp:unit=HH}}/{{topic}}-{{partition}}-{{start_offset}}"
	cfg.File.TimestampSource = "event"
	cfg.File.Timezone = "Asia/Kolkata"
	_, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}

	dirs := map[string]int{}
	if err := testkit.WalkOutput(dir, func(path string) error {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		d, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		dirs[d]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 || dirs["01-01T01"] == 0 {
		t.Errorf("files under %v, want all under 01-01T01", dirs)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", end)
	if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); !maps.Equal(got, end) {
		t.Errorf("committed %v, want %v", got, end)
	}
}
