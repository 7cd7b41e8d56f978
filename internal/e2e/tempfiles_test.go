package e2e

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// TestKilledWriterTempFiles SIGKILLs spillway while each partition has a
// file open (its temp file in the output directory), then restarts it: the
// restart must remove what the killed writer left, for every template. A
// template with a variable between the partition and {{start_offset}} is
// not listable per partition, and one with a "/" after {{start_offset}}
// puts each file in a directory of its own: neither file is in the
// partition prefix's directory.
func TestKilledWriterTempFiles(t *testing.T) {
	t.Parallel()
	const partitions, records = 2, 100
	templates := map[string]string{
		"not listable":        "{{topic}}/{{timestamp:unit=yyyy}}/{{partition}}-{{start_offset}}",
		"folder after offset": "{{topic}}-{{partition}}-{{start_offset}}/part",
	}
	names := slices.Sorted(maps.Keys(templates))
	topics := make([]string, len(names))
	for i := range names {
		topics[i] = fmt.Sprintf("temps%d", i)
	}
	b := startBroker(t, partitions, topics...)
	admin := b.Client(t)
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			topic, out := topics[i], t.TempDir()
			testkit.Produce(t, admin, topic, records, func(n int) *kgo.Record {
				return &kgo.Record{Partition: int32(n % partitions), Value: fmt.Appendf(nil, `{"i":%d}`, n)}
			})
			ends := testkit.EndOffsets(t, admin, topic)
			// Files end only at the stop: each partition keeps one open.
			config := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: temps-%d
  topics: [%s]
  instance_id: temps-%d
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  name_template: %q
  max_age: 1h
format:
  type: jsonl
  compression: none
backpressure:
  memory_limit: 256MiB
admin:
  listen: ""
`, b.Addr, i, topic, i, out, templates[name])

			// waitTemps waits until the output directory holds a temp
			// file of each partition that isn't in old.
			waitTemps := func(sp *spillwayProc, old []string) []string {
				t.Helper()
				deadline := time.Now().Add(2 * time.Minute)
				for {
					var fresh []string
					for _, f := range tempFiles(t, out) {
						if !slices.Contains(old, f) {
							fresh = append(fresh, f)
						}
					}
					if len(fresh) == partitions {
						return fresh
					}
					select {
					case <-sp.Done():
						t.Fatalf("spillway exited: %s", describeExit(sp.Wait(t, 0)))
					case <-time.After(50 * time.Millisecond):
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d new temp files after 2m, want %d: %v", len(fresh), partitions, fresh)
					}
				}
			}
			sp := startSpillway(t, config, nil)
			left := waitTemps(sp, nil)
			sp.Signal(t, syscall.SIGKILL)
			sp.Wait(t, 30*time.Second)
			t.Logf("the killed writer left %v", left)

			// The restart opens files of its own only after it resumed
			// the partitions, which removes what the killed one left.
			sp = startSpillway(t, config, nil)
			waitTemps(sp, left)
			sp.WaitRunning(t)
			sp.Signal(t, syscall.SIGTERM)
			if st := sp.Wait(t, 60*time.Second); st.ExitCode() != 0 {
				t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
			}
			if temps := tempFiles(t, out); len(temps) > 0 {
				t.Errorf("%d temp files left after the restart stopped: %v", len(temps), temps)
			}
			// Every record once: verify reads the names with the template.
			checkVerify(t, config, ends)
		})
	}
}
