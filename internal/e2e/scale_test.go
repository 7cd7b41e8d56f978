package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

const (
	scaleTopic      = "events"
	scaleGroup      = "scale"
	scalePartitions = 24
	scaleRecords    = 240_000
	scaleBatch      = 1_200
)

// TestScaleOut runs several spillway processes in one group over 24
// partitions while records flow in: three start together, one is SIGKILLed
// mid-run, a fourth joins, and one leaves gracefully. Kafka's group protocol
// alone shares the partitions. At the end every record is in storage
// exactly once, and `spillway verify` agrees.
func TestScaleOut(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs four spillway processes against a broker process; skipped with -short")
	}
	out := t.TempDir()
	b := startBroker(t, scalePartitions, scaleTopic)
	admin := b.Client(t)
	adm := kadm.NewClient(admin)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := produceInBackground(ctx, b.Client(t, kgo.ProducerLinger(5*time.Millisecond)),
		scaleTopic, scalePartitions, scaleRecords, scaleBatch, 200)

	config := func(name string) string {
		return fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  client_id: %s
  # A killed member's partitions move after this long.
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  max_records: 2000
  max_age: 1s
backpressure:
  memory_limit: 256MiB
admin:
  listen: ""
shutdown:
  timeout: 20s
`, b.Addr, scaleGroup, scaleTopic, name, out)
	}

	procs := map[string]*spillwayProc{}
	start := func(name string) { procs[name] = startSpillway(t, config(name), nil) }
	for _, name := range []string{"a", "b", "c"} {
		start(name)
	}
	waitMembers(t, adm, procs, []string{"a", "b", "c"})
	waitCommitted(t, admin, scaleGroup, scaleTopic, 20_000)

	// b dies: after the session timeout its partitions go to a and c.
	procs["b"].Signal(t, syscall.SIGKILL)
	t.Logf("b: %s", describeExit(procs["b"].Wait(t, 30*time.Second)))
	delete(procs, "b")
	waitMembers(t, adm, procs, []string{"a", "c"})
	waitCommitted(t, admin, scaleGroup, scaleTopic, 60_000)

	// d joins and takes a share.
	start("d")
	waitMembers(t, adm, procs, []string{"a", "c", "d"})
	waitCommitted(t, admin, scaleGroup, scaleTopic, 100_000)

	// a leaves gracefully: it flushes and commits what it has, then its
	// partitions move at once.
	procs["a"].WaitRunning(t)
	procs["a"].Signal(t, syscall.SIGTERM)
	if st := procs["a"].Wait(t, 60*time.Second); st.ExitCode() != 0 {
		t.Fatalf("a after SIGTERM: %s, want exit status 0", describeExit(st))
	}
	delete(procs, "a")
	waitMembers(t, adm, procs, []string{"c", "d"})

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	ends := testkit.EndOffsets(t, admin, scaleTopic)
	waitDrained(t, admin, scaleGroup, scaleTopic, ends, procs)
	for _, name := range slices.Sorted(maps.Keys(procs)) {
		procs[name].WaitRunning(t)
		procs[name].Signal(t, syscall.SIGTERM)
	}
	for _, name := range slices.Sorted(maps.Keys(procs)) {
		if st := procs[name].Wait(t, 60*time.Second); st.ExitCode() != 0 {
			t.Fatalf("%s after SIGTERM: %s, want exit status 0", name, describeExit(st))
		}
	}

	recs := readStoredOffsets(t, out)
	t.Logf("storage: %d records read back", len(recs))
	testkit.AssertExactlyOnce(t, recs, scaleTopic, ends)
	if leftovers := tempFiles(t, out); len(leftovers) > 0 {
		t.Errorf("%d temporary file(s) left, e.g. %s", len(leftovers), leftovers[0])
	}
	checkVerify(t, config("verify"), ends)
}

// waitMembers waits until the group's members are exactly the given client
// ids, each with at least one partition, and every partition is assigned.
func waitMembers(t testing.TB, adm *kadm.Client, procs map[string]*spillwayProc, want []string) {
	t.Helper()
	waitGroup(t, adm, scaleGroup, procs, fmt.Sprintf("members %v sharing all %d partitions", want, scalePartitions),
		func(got map[string]int, assigned int) bool {
			return slices.Equal(slices.Sorted(maps.Keys(got)), want) && assigned == scalePartitions &&
				!slices.Contains(slices.Collect(maps.Values(got)), 0)
		})
}

// waitGroup waits until the stable group's shares (partitions per client
// id) satisfy ok, failing if one of procs exits first.
func waitGroup(t testing.TB, adm *kadm.Client, group string, procs map[string]*spillwayProc, what string, ok func(map[string]int, int) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, assigned := groupSharesOf(t, adm, group)
		if ok(got, assigned) {
			t.Logf("group members and their partitions: %v", got)
			return
		}
		for name, p := range procs {
			select {
			case <-p.Done():
				t.Fatalf("%s exited: %s", name, describeExit(p.Wait(t, 0)))
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group never reached %s; last seen %v", what, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// groupSharesOf returns how many partitions each member of a stable group
// (by client id) has, and how many are assigned in all.
func groupSharesOf(t testing.TB, adm *kadm.Client, group string) (map[string]int, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("describe group: %v", err)
	}
	shares, total := map[string]int{}, 0
	g, ok := groups[group]
	if !ok || g.State != "Stable" {
		return shares, 0
	}
	for _, m := range g.Members {
		n := 0
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range a.Topics {
				n += len(tp.Partitions)
			}
		}
		shares[m.ClientID] += n
		total += n
	}
	return shares, total
}

// waitCommitted waits until the group has committed at least n records.
func waitCommitted(t testing.TB, admin *kgo.Client, group, topic string, n int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := sum(testkit.CommittedOffsets(t, admin, group, topic))
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d records committed after 3m, want %d", got, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDrained waits until the group has committed every partition to its
// end offset.
func waitDrained(t testing.TB, admin *kgo.Client, group, topic string, ends map[int32]int64, procs map[string]*spillwayProc) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		done, complete := drainProgress(testkit.CommittedOffsets(t, admin, group, topic), ends)
		if complete == len(ends) {
			return
		}
		for name, p := range procs {
			select {
			case <-p.Done():
				t.Fatalf("%s exited before the topic was drained (%d records committed): %s", name, done, describeExit(p.Wait(t, 0)))
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic not drained after 5m: %d records committed", done)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
