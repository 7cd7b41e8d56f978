package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// TestIcebergTwoInstancesRebalanceZombie runs two `spillway run` processes
// of one group committing to one table of one SQL catalog (a SQLite file
// both open, so their commits really conflict). b joins late (a
// rebalance), then a is frozen (SIGSTOP) past its session timeout while it
// writes: b takes all partitions, catches up from the ledger and commits
// past where a stopped, in every partition. Then a wakes (SIGCONT) with
// files it had handed to its commit loop and not committed, rejoins and
// writes on. At the end the table's current snapshot, read independently,
// holds every offset exactly once, no delete file, and each partition's
// files entered the table in ledger order: no file came in after a file
// that followed it in the ledger, which is what a zombie adding its stale
// files after the new owner's would do.
func TestIcebergTwoInstancesRebalanceZombie(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("freezes a spillway process past its session timeout; skipped with -short")
	}
	const (
		group      = "ice-zombie"
		partitions = 8
		days       = 3
		size       = 200
	)
	outside.PythonAvro(t)
	duck := outside.NewDuckDB(t)
	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	catalogDB := filepath.Join(out, "catalog.db")
	b := startBroker(t, partitions, iceTopic)
	admin := b.Client(t)
	adm := kadm.NewClient(admin)
	producer := b.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := 0 // the index of the next record to produce
	produce := func(n int, pace bool) <-chan error {
		ch := produceDays(ctx, producer, iceTopic, partitions, next, n, 400, size, days, pace)
		next += n
		return ch
	}

	config := func(name string) string {
		return fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  client_id: %s
  start_offset: earliest
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  max_records: 300
  max_age: 1s
  timestamp_source: event
  timezone: UTC
format:
  type: parquet
  compression: zstd
iceberg:
  table: "kafka.{{topic}}"
  partition_by: ["day(timestamp)"]
  commit_interval: 2s
admin:
  listen: ""
shutdown:
  timeout: 30s
`, b.Addr, group, iceTopic, name, out)
	}
	waitMeta := func(what string, procs map[string]*spillwayProc, cond func(*iceMeta) bool) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for !cond(readIceMeta(t, catalogDB)) {
			for name, p := range procs {
				select {
				case <-p.Done():
					t.Fatalf("%s exited before %s: %s", name, what, describeExit(p.Wait(t, 0)))
				default:
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 3m", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	byWriter := func(m *iceMeta, w string) int {
		n := 0
		if m != nil {
			for _, s := range m.Snapshots {
				if s.writer == w {
					n++
				}
			}
		}
		return n
	}

	// ---- a alone, then b joins: a rebalance, both commit.
	if err := <-produce(8_000, false); err != nil {
		t.Fatal(err)
	}
	a := startSpillway(t, config("a"), nil)
	procs := map[string]*spillwayProc{"a": a}
	waitMeta("a snapshot by a", procs, func(m *iceMeta) bool { return byWriter(m, "a") > 0 })
	bproc := startSpillway(t, config("b"), nil)
	procs["b"] = bproc
	more := produce(24_000, true)
	waitShares(t, adm, group, procs, map[string]int{"a": partitions / 2, "b": partitions / 2})
	waitMeta("a snapshot by b", procs, func(m *iceMeta) bool { return byWriter(m, "b") > 0 })

	// ---- a freezes while it writes; b takes its partitions and commits
	// past where the table stood, in every partition.
	waitCommitted(t, admin, group, iceTopic, 12_000)
	a.Signal(t, syscall.SIGSTOP)
	frozen := readIceMeta(t, catalogDB)
	held := frozen.current().ledger
	t.Logf("a frozen: the table has %d snapshots (%d by a, %d by b), ledger seqs %v",
		len(frozen.Snapshots), byWriter(frozen, "a"), byWriter(frozen, "b"), held)
	delete(procs, "a")
	waitShares(t, adm, group, procs, map[string]int{"b": partitions})
	// Records in every partition after the takeover, whether or not the
	// background producer is done.
	if err := <-produce(partitions*100, false); err != nil {
		t.Fatal(err)
	}
	waitMeta("b's commits past the freeze in every partition", procs, func(m *iceMeta) bool {
		cur := m.current()
		for p := range int32(partitions) {
			if cur.ledger[p] <= held[p] {
				return false
			}
		}
		return true
	})
	woke := readIceMeta(t, catalogDB)
	t.Logf("b committed past the freeze in every partition: %d snapshots; waking a", len(woke.Snapshots))

	// ---- a wakes, finds its partitions lost, rejoins and writes on.
	a.Signal(t, syscall.SIGCONT)
	procs["a"] = a
	// It rejoins (the group is shared again), or stops on finding its
	// next ledger entry taken, as in TestZombieCannotOverwriteOrCommit: a
	// supervisor restarts it.
	want := map[string]int{"a": partitions / 2, "b": partitions / 2}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if exited(a) {
			st := a.Wait(t, 0)
			log := tail(a.LogPath, 40)
			t.Logf("a exited after waking: %s", describeExit(st))
			if st.ExitCode() != 1 || !strings.Contains(log, "another instance") && !strings.Contains(log, "another process took the partition over") {
				t.Fatalf("a exited with %s; want exit 1 naming the other writer. Log:\n%s", describeExit(st), log)
			}
			procs["a"] = startSpillway(t, config("a"), nil)
			break
		}
		if got, _ := groupSharesOf(t, adm, group); maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a neither rejoined nor stopped within 3m of waking")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if zombie := procs["a"]; zombie == a && !strings.Contains(tail(a.LogPath, 400), "partitions lost") {
		t.Fatalf("a rejoined without reporting its partitions lost; log:\n%s", tail(a.LogPath, 60))
	}
	waitShares(t, adm, group, procs, want)
	if err := <-more; err != nil {
		t.Fatal(err)
	}
	if err := <-produce(4_000, false); err != nil {
		t.Fatal(err)
	}
	ends := testkit.EndOffsets(t, admin, iceTopic)
	if sum(ends) != int64(next) {
		t.Fatalf("end offsets %v add up to %d, want %d", ends, sum(ends), next)
	}
	waitDrained(t, admin, group, iceTopic, ends, procs)
	for _, name := range []string{"a", "b"} {
		procs[name].WaitRunning(t)
		procs[name].Signal(t, syscall.SIGTERM)
	}
	for _, name := range []string{"a", "b"} {
		if st := procs[name].Wait(t, time.Minute); st.ExitCode() != 0 {
			t.Fatalf("%s after SIGTERM: %s, want exit status 0", name, describeExit(st))
		}
	}

	// ---- the table, read independently.
	meta := readIceMeta(t, catalogDB)
	manifests, entries := iceManifests(t, meta)
	files := make([]string, len(entries))
	for i, e := range entries {
		files[i] = e.path
	}
	t.Logf("table: %d snapshots (%d by a, %d by b), %d manifests, %d data files",
		len(meta.Snapshots), byWriter(meta, "a"), byWriter(meta, "b"), manifests, len(files))
	checkIcebergExactlyOnce(t, duck, files, ends)
	if n := byWriter(meta, "a") - byWriter(woke, "a"); n == 0 {
		t.Errorf("a committed no snapshot after it woke")
	}
	checkLedgerOrder(t, out, meta, entries)
	checkVerify(t, config("verify"), ends)
}

func exited(p *spillwayProc) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// checkLedgerOrder checks, from the ledger's entries (read as JSON from
// storage), that each partition's files entered the table in ledger order
// (a file added by a later snapshot has a later ledger seq than every file
// of an earlier one), and that every ledger entry's file is in it.
func checkLedgerOrder(t *testing.T, out string, meta *iceMeta, entries []iceEntry) {
	t.Helper()
	type led struct {
		seq       int64
		partition int32
	}
	byKey := map[string]led{}
	err := filepath.WalkDir(filepath.Join(out, "_spillway", "ledger"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var e struct {
			Seq       int64 `json:"seq"`
			Partition int32 `json:"partition"`
			File      *struct {
				Key string `json:"key"`
			} `json:"file"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if e.File != nil && e.File.Key != "" {
			byKey[filepath.Join(out, e.File.Key)] = led{e.Seq, e.Partition}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	type added struct {
		snapshot, seq int64
		path          string
	}
	parts := map[int32][]added{}
	inTable := map[string]bool{}
	for _, e := range entries {
		l, ok := byKey[e.path]
		if !ok {
			t.Errorf("%s is in the table and in no ledger entry", e.path)
			continue
		}
		inTable[e.path] = true
		parts[l.partition] = append(parts[l.partition], added{e.seq, l.seq, e.path})
	}
	for key := range byKey {
		if !inTable[key] {
			t.Errorf("%s is in the ledger and not in the table", key)
		}
	}
	for p, fs := range parts {
		slices.SortFunc(fs, func(a, b added) int {
			if a.snapshot != b.snapshot {
				return int(a.snapshot - b.snapshot)
			}
			return int(a.seq - b.seq)
		})
		for i := 1; i < len(fs); i++ {
			if fs[i].seq <= fs[i-1].seq {
				w := func(f added) string {
					if s := meta.bySeq(f.snapshot); s != nil {
						return s.writer
					}
					return "?"
				}
				t.Errorf("partition %d: %s (ledger seq %d) was added by snapshot %d (writer %s), after %s (ledger seq %d, snapshot %d, writer %s): out of ledger order",
					p, filepath.Base(fs[i].path), fs[i].seq, fs[i].snapshot, w(fs[i]), filepath.Base(fs[i-1].path), fs[i-1].seq, fs[i-1].snapshot, w(fs[i-1]))
			}
		}
	}
	if !t.Failed() {
		t.Logf("ledger: %d files in %d partitions, each partition's in ledger order in the table", len(byKey), len(parts))
	}
}
