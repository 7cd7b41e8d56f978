package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

const (
	crashTopic      = "events"
	crashGroup      = "crash"
	crashPartitions = 8
	crashRecords    = 300_000
	crashBatch      = 1_000
	crashMinKills   = 5
)

// TestCrashExactlyOnce SIGKILLs spillway at random moments while it works
// (after each run has published a file of its own) and records still flow
// into the topic, restarting it after each kill, then lets a last run drain
// the topic and stop cleanly. Every record must be in storage
// exactly once, and no temporary file may be left behind: a restarted
// spillway must resume after what the killed one already stored, even if
// it had not committed it yet.
//
// It runs twice: with open files in memory, and with them staged in a
// spool directory, which the restarts share as a new pod on the same node
// would: each run must clear what the killed one left there.
func TestCrashExactlyOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts spillway while 300k records are produced; skipped with -short")
	}
	// Each run has a broker and a directory of its own.
	t.Run("memory", func(t *testing.T) { t.Parallel(); crashExactlyOnce(t, "") })
	t.Run("spool", func(t *testing.T) { t.Parallel(); crashExactlyOnce(t, filepath.Join(t.TempDir(), "spool")) })
}

// crashExactlyOnce is TestCrashExactlyOnce, with backpressure.spool_dir
// spool ("" for none).
func crashExactlyOnce(t *testing.T, spool string) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, crashPartitions, crashTopic)
	admin := b.Client(t)

	// ---- the producer, in the background: batches with short sleeps, so
	// that it still produces while spillway is killed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := produceInBackground(ctx, b.Client(t, kgo.ProducerLinger(5*time.Millisecond)),
		crashTopic, crashPartitions, crashRecords, crashBatch, 1000)

	config := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  start_offset: earliest
  # Static membership: each restart takes the killed member's place at
  # once, so kills land while spillway writes, not while it rejoins.
  instance_id: crash-0
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  max_records: 2000
  max_age: 1s
format:
  type: jsonl
  compression: zstd
backpressure:
  memory_limit: 256MiB
  spool_dir: %q
  disk_limit: 1GiB
admin:
  listen: ""
log:
  level: info
shutdown:
  timeout: 20s
`, b.Addr, crashGroup, crashTopic, out, spool)

	// ---- kill spillway at random moments, at least crashMinKills times and
	// until the producer is done.
	var produceErr error
	producerDone := false
	kills, midWrite, working := 0, 0, 0
	for kills < crashMinKills || !producerDone {
		// A kill lands while the run works: once it has published a file
		// of its own, at a random moment of the next 1.5 s. A fixed wait
		// would land before the run even joined the group on a busy
		// machine (seen: 121 kills, none after a record was stored). A run
		// that publishes nothing for 30 s (the topic is drained) is
		// killed all the same.
		before := publishedFiles(t, out)
		sp := startSpillway(t, config, nil)
		start := time.Now()
		published := false
		for !published && time.Since(start) < 30*time.Second {
			select {
			case <-sp.Done():
				t.Fatalf("spillway (run %d) exited by itself before being killed: %s", kills+1, describeExit(sp.Wait(t, 0)))
			case <-time.After(50 * time.Millisecond):
			}
			published = publishedFiles(t, out) > before
		}
		if published {
			working++
		}
		wait := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
		select {
		case <-sp.Done():
			t.Fatalf("spillway (run %d) exited by itself before being killed: %s", kills+1, describeExit(sp.Wait(t, 0)))
		case <-time.After(wait):
		}
		life := time.Since(start)
		sp.Signal(t, syscall.SIGKILL)
		st := sp.Wait(t, 30*time.Second)
		kills++
		var committed int64
		for _, o := range testkit.CommittedOffsets(t, admin, crashGroup, crashTopic) {
			committed += max(o, 0)
		}
		// A temp file is a file the killed run was writing or uploading.
		temps := len(tempFiles(t, out))
		if temps > 0 {
			midWrite++
		}
		t.Logf("kill %d after %s (published: %v): %s; %d records committed so far; %d files left mid-write", kills, life.Round(time.Millisecond), published, describeExit(st), committed, temps)
		if !producerDone {
			select {
			case produceErr = <-produced:
				producerDone = true
			default:
			}
		}
	}
	if produceErr != nil {
		t.Fatal(produceErr)
	}

	ends := testkit.EndOffsets(t, admin, crashTopic)
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != crashRecords {
		t.Fatalf("end offsets %v add up to %d records, want %d", ends, total, crashRecords)
	}
	t.Logf("producer done: %d records; spillway killed %d times, %d of them after publishing, %d mid-write", total, kills, working, midWrite)
	if working == 0 {
		t.Fatalf("none of the %d kills came after the run had published a file: the test killed spillway only while it started", kills)
	}

	// ---- a last run drains the topic and stops cleanly.
	sp := startSpillway(t, config, nil)
	// Generous: it only fails on a hang.
	const deadline = 5 * time.Minute
	start := time.Now()
	for {
		committed := testkit.CommittedOffsets(t, admin, crashGroup, crashTopic)
		done, complete := drainProgress(committed, ends)
		if complete == len(ends) {
			break
		}
		select {
		case <-sp.Done():
			t.Fatalf("last spillway run exited before draining the topic (%d/%d records committed): %s",
				done, total, describeExit(sp.Wait(t, 0)))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Since(start) > deadline {
			t.Fatalf("topic not drained after %s: %d/%d records committed", deadline, done, total)
		}
	}
	t.Logf("last run drained the topic in %s", time.Since(start).Round(100*time.Millisecond))
	sp.WaitRunning(t)
	sp.Signal(t, syscall.SIGTERM)
	if st := sp.Wait(t, 60*time.Second); st.ExitCode() != 0 {
		t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
	}

	// ---- every record exactly once, and no temporary file left behind.
	recs := readStoredOffsets(t, out)
	t.Logf("storage: %d records read back (%d produced)", len(recs), total)
	testkit.AssertExactlyOnce(t, recs, crashTopic, ends)

	if leftovers := tempFiles(t, out); len(leftovers) > 0 {
		t.Errorf("%d temporary file(s) left in the output directory, e.g. %s", len(leftovers), leftovers[0])
	}
	if spool != "" {
		// The killed runs' spool files are cleared by the next run, and a
		// run that stops cleanly leaves nothing.
		var left []string
		err := filepath.WalkDir(spool, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left = append(left, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("%d file(s) left in the spool directory after a clean stop, e.g. %s", len(left), left[0])
		}
	}
	checkVerify(t, config, ends)
}

// publishedFiles counts the data files under out (testkit.WalkOutput's:
// no temporary files, no ledger).
func publishedFiles(t testing.TB, out string) int {
	t.Helper()
	n := 0
	if err := testkit.WalkOutput(out, func(string) error { n++; return nil }); err != nil {
		t.Fatalf("walking %s: %v", out, err)
	}
	return n
}
