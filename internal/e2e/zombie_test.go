package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// TestZombieCannotOverwriteOrCommit freezes a spillway (SIGSTOP) while it
// writes, long enough for the group to give its partitions to a second one,
// then wakes it. The zombie still holds files it had closed and not yet
// published, and offsets it had not yet committed. It must neither replace
// the new owner's files (create-only writes fence it) nor move the group's
// offsets back (the broker refuses its stale generation). At the end every
// record is stored exactly once.
func TestZombieCannotOverwriteOrCommit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("freezes a spillway process past its session timeout; skipped with -short")
	}
	const (
		group      = "zombie"
		partitions = 8
		records    = 120_000
	)
	out := t.TempDir()
	b := startBroker(t, partitions, scaleTopic)
	admin := b.Client(t)
	adm := kadm.NewClient(admin)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := produceInBackground(ctx, b.Client(t, kgo.ProducerLinger(5*time.Millisecond)),
		scaleTopic, partitions, records, 400, 200)

	config := func(name string) string {
		return fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  client_id: %s
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  max_records: 500
  max_age: 1s
admin:
  listen: ""
shutdown:
  timeout: 20s
`, b.Addr, group, scaleTopic, name, out)
	}

	zombie := startSpillway(t, config("zombie"), nil)
	waitCommitted(t, admin, group, scaleTopic, 5_000)
	zombie.Signal(t, syscall.SIGSTOP)
	frozenAt := testkit.CommittedOffsets(t, admin, group, scaleTopic)
	t.Logf("zombie frozen with %d records committed and %d files being written", sum(frozenAt), len(tempFiles(t, out)))

	owner := startSpillway(t, config("owner"), nil)
	procs := map[string]*spillwayProc{"owner": owner}
	waitShares(t, adm, group, procs, map[string]int{"owner": partitions})
	// The owner writes past where the zombie stopped.
	waitCommitted(t, admin, group, scaleTopic, sum(frozenAt)+10_000)
	before := testkit.CommittedOffsets(t, admin, group, scaleTopic)
	t.Logf("owner has all partitions and %d records committed; waking the zombie", sum(before))

	zombie.Signal(t, syscall.SIGCONT)
	// Watch the group's offsets while the zombie wakes, finds out and
	// rejoins: none may move back.
	last := before
	watchUntil := time.Now().Add(15 * time.Second)
	for time.Now().Before(watchUntil) {
		now := testkit.CommittedOffsets(t, admin, group, scaleTopic)
		for p, o := range now {
			if o < last[p] {
				t.Fatalf("partition %d: committed offset moved back from %d to %d after the zombie woke", p, last[p], o)
			}
		}
		last = now
		time.Sleep(50 * time.Millisecond)
	}
	// It must have found out that it lost its partitions: from the
	// group (the client reports them lost), or from storage, when a file
	// it had in hand reached a ledger entry the owner wrote first before
	// the client noticed (create-only fencing stops it; see below).
	select {
	case <-zombie.Done():
	default:
		if log := tail(zombie.LogPath, 200); !strings.Contains(log, "partitions lost") {
			t.Fatalf("the zombie runs on, and never reported its partitions lost; log:\n%s", log)
		}
	}
	for _, line := range strings.Split(tail(zombie.LogPath, 200), "\n") {
		if strings.Contains(line, "lost") || strings.Contains(line, "commit") || strings.Contains(line, "another writer") {
			t.Logf("zombie: %s", line)
		}
	}
	// The zombie may have stopped on finding its file taken (create-only
	// fencing); a supervisor would restart it, and so does this test.
	select {
	case <-zombie.Done():
		st := zombie.Wait(t, 0)
		log := tail(zombie.LogPath, 40)
		t.Logf("zombie exited after waking: %s", describeExit(st))
		if st.ExitCode() != 1 || !strings.Contains(log, "another instance") {
			t.Fatalf("zombie exited with %s; want exit 1 naming the other writer. Log:\n%s", describeExit(st), log)
		}
		zombie = startSpillway(t, config("zombie"), nil)
	default:
	}
	procs["zombie"] = zombie

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	ends := testkit.EndOffsets(t, admin, scaleTopic)
	waitDrained(t, admin, group, scaleTopic, ends, procs)
	for _, name := range []string{"owner", "zombie"} {
		procs[name].WaitRunning(t)
		procs[name].Signal(t, syscall.SIGTERM)
	}
	for _, name := range []string{"owner", "zombie"} {
		if st := procs[name].Wait(t, 60*time.Second); st.ExitCode() != 0 {
			t.Fatalf("%s after SIGTERM: %s, want exit status 0", name, describeExit(st))
		}
	}
	recs := readStoredOffsets(t, out)
	t.Logf("storage: %d records read back", len(recs))
	testkit.AssertExactlyOnce(t, recs, scaleTopic, ends)
	checkVerify(t, config("verify"), ends)
}

func sum(offsets map[int32]int64) int64 {
	var n int64
	for _, o := range offsets {
		n += max(o, 0)
	}
	return n
}

// waitShares waits until the group is stable with exactly these members
// (by client id) holding these numbers of partitions.
func waitShares(t testing.TB, adm *kadm.Client, group string, procs map[string]*spillwayProc, want map[string]int) {
	t.Helper()
	waitGroup(t, adm, group, procs, fmt.Sprint(want), func(got map[string]int, _ int) bool { return maps.Equal(got, want) })
}
