package main

import (
	"fmt"
	"testing"

	"github.com/spillway/spillway/internal/testkit"
)

// A configured topic that does not exist stops `run` at start with exit 1
// and a message that names the key and the topic, instead of idling.
func TestRunMissingTopicExits1(t *testing.T) {
	cluster := testkit.NewCluster(t, 1, "events")
	path := writeFile(t, "spillway.yaml", fmt.Sprintf(`kafka:
  brokers: [%q]
  topics: [events, missing]
  startup_timeout: 3s
storage:
  url: file://%s
admin:
  listen: ""
`, cluster.Addrs()[0], t.TempDir()))
	r := runInProcess(t, path, nil)
	if r.started || r.code != exitRuntime {
		t.Fatalf("run: started %v, exit %d, want exit %d before starting\n%s", r.started, r.code, exitRuntime, r.stderr)
	}
	wantContains(t, "stderr", r.stderr, `spillway: kafka.topics: topic "missing" does not exist; create it, or correct kafka.topics`)
}
