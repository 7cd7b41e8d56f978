package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// layoutCase is a file layout whose exactly-once no longer rests on reading
// data files back: with the ledger, resume is independent of the format's
// fields and of the template.
type layoutCase struct {
	name     string
	template string
	fields   string // format.fields and format.envelope lines
	extra    string // more file: keys
	// interleaved: records of one partition go to several open files at
	// once, so ledger entries must hold files of several offset runs.
	interleaved bool
	// latest: one object per key, replaced; at-least-once, so storage
	// must end with each key's last record rather than every record once.
	latest bool
}

var layoutCases = []layoutCase{
	{
		// No offset field in the files: resume can't read offsets back.
		name:     "value_only",
		template: "{{topic}}-{{partition}}-{{start_offset}}",
		fields:   "  fields: [value]\n  envelope: false\n",
	},
	{
		// Event time, Hive-style, with timestamps out of order across
		// hour buckets: several files of one partition are open at once.
		name:        "hive_event_time",
		template:    "dt={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/hour={{timestamp:unit=HH}}/{{topic}}-{{partition}}-{{start_offset}}",
		fields:      "  fields: [value, offset]\n",
		extra:       "  timestamp_source: event\n",
		interleaved: true,
	},
	{
		// Key partitioning within a partition, with keys that need
		// escaping ("k/3"): five files of one partition open at once.
		name:        "key",
		template:    "{{topic}}/{{partition}}/{{key}}/{{start_offset}}",
		fields:      "",
		interleaved: true,
	},
	{
		// One object per partition and key, replaced by each flush: after
		// kills and lost commits, each holds its key's last record.
		name:     "latest_per_key",
		template: "{{topic}}/{{partition}}/{{key}}",
		fields:   "  fields: [value]\n  envelope: false\n",
		latest:   true,
	},
}

// TestCrashLayouts SIGKILLs spillway at random moments while records flow,
// for layouts that the old resume (read the last file back) could not make
// exactly-once, and now and then restarts it under a new consumer group, so
// that the commits are lost and resume rests on the ledger alone. Every
// record must end in storage exactly once.
func TestCrashLayouts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts spillway while records are produced; skipped with -short")
	}
	for _, lc := range layoutCases {
		t.Run(lc.name, func(t *testing.T) {
			t.Parallel()
			crashLayout(t, lc)
		})
	}
}

const (
	layoutPartitions = 4
	layoutRecords    = 60_000
	layoutMinKills   = 4
)

func crashLayout(t *testing.T, lc layoutCase) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x1a7))

	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	const topic = "events"
	b := startBroker(t, layoutPartitions, topic)
	admin := b.Client(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := produceLayoutRecords(ctx, b.Client(t, kgo.ProducerLinger(5*time.Millisecond)), topic, layoutRecords)

	config := func(group string) string {
		return fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  start_offset: earliest
  instance_id: layout-0
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  name_template: %q
  max_records: 700
  max_age: 1s
%sformat:
  type: jsonl
  compression: zstd
%sbackpressure:
  memory_limit: 256MiB
admin:
  listen: ""
shutdown:
  timeout: 20s
`, b.Addr, group, topic, out, lc.template, lc.extra, lc.fields)
	}

	groupN := 0
	group := func() string { return fmt.Sprintf("layout-%d", groupN) }
	var produceErr error
	producerDone := false
	kills := 0
	for kills < layoutMinKills || !producerDone {
		sp := startSpillway(t, config(group()), nil)
		wait := time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
		select {
		case <-sp.Done():
			t.Fatalf("spillway (run %d) exited by itself before being killed: %s", kills+1, describeExit(sp.Wait(t, 0)))
		case <-time.After(wait):
		}
		sp.Signal(t, syscall.SIGKILL)
		st := sp.Wait(t, 30*time.Second)
		kills++
		lost := ""
		if kills%3 == 0 {
			// The next run's group has no commits at all: as if every
			// commit was lost, resume stands on the ledger alone.
			groupN++
			lost = "; the next run uses a new group (no commits)"
		}
		t.Logf("kill %d after %s: %s%s", kills, wait.Round(time.Millisecond), describeExit(st), lost)
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
	ends := testkit.EndOffsets(t, admin, topic)

	sp := startSpillway(t, config(group()), nil)
	start := time.Now()
	for {
		committed := testkit.CommittedOffsets(t, admin, group(), topic)
		done, complete := drainProgress(committed, ends)
		if complete == len(ends) {
			break
		}
		select {
		case <-sp.Done():
			t.Fatalf("last run exited before draining the topic (%d records committed): %s", done, describeExit(sp.Wait(t, 0)))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("topic not drained after 5m: %d records committed", done)
		}
	}
	sp.WaitRunning(t)
	sp.Signal(t, syscall.SIGTERM)
	if st := sp.Wait(t, 60*time.Second); st.ExitCode() != 0 {
		t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
	}

	seen, files := readLayoutValues(t, out)
	if lc.latest {
		checkLatestObjects(t, out, seen, files)
		return
	}
	var dups, missing int
	for i := 0; i < layoutRecords; i++ {
		switch seen[i] {
		case 0:
			missing++
		case 1:
		default:
			dups++
		}
	}
	t.Logf("%d kills, %d groups; %d files; %d records produced, %d distinct stored", kills, groupN+1, files, layoutRecords, len(seen))
	if missing != 0 || dups != 0 || len(seen) != layoutRecords {
		t.Fatalf("%d records missing, %d stored more than once, %d distinct values (want %d)", missing, dups, len(seen), layoutRecords)
	}
	entries, multi := ledgerRuns(t, out)
	t.Logf("ledger: %d entries, %d of them for files of several offset runs", entries, multi)
	if lc.interleaved && multi == 0 {
		t.Errorf("no ledger entry holds a file of several offset runs: the test did not keep several files of a partition open at once")
	}
}

// checkLatestObjects: with one object per partition and key, storage ends
// with one object for each of the 4×5 pairs, holding the pair's last
// record, and nothing else.
func checkLatestObjects(t *testing.T, out string, seen map[int]int, files int) {
	t.Helper()
	want := map[int]bool{}
	for i := layoutRecords - 1; i >= 0 && len(want) < layoutPartitions*5; i-- {
		want[i] = true // the last i of each (i%4, i%5) pair
	}
	if files != len(want) || len(seen) != len(want) {
		t.Fatalf("%d objects holding %d distinct records, want %d objects, one per partition and key", files, len(seen), len(want))
	}
	for i, n := range seen {
		if !want[i] || n != 1 {
			t.Fatalf("record %d stored %d times; want only each pair's last record, once", i, n)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "_spillway", "ledger")); !os.IsNotExist(err) {
		t.Fatalf("a ledger was written for the one-object-per-key layout: %v", err)
	}
}

// ledgerRuns counts the ledger entries under dir, and those whose file
// holds more than one run of offsets.
func ledgerRuns(t *testing.T, dir string) (entries, multi int) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(dir, "_spillway"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var e struct {
			File struct {
				Ranges [][2]int64 `json:"ranges"`
			} `json:"file"`
		}
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		entries++
		if len(e.File.Ranges) > 1 {
			multi++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries, multi
}

// produceLayoutRecords produces total records, round-robin over the
// partitions, whose values carry their number i and whose timestamps jump
// back and forth over four hours, so event-time layouts keep several files
// of one partition open at once. Keys take five values.
func produceLayoutRecords(ctx context.Context, cl *kgo.Client, topic string, total int) <-chan error {
	done := make(chan error, 1)
	base := time.Date(2026, 3, 8, 0, 30, 0, 0, time.UTC)
	go func() {
		done <- func() error {
			const batch = 500
			for from := 0; from < total; from += batch {
				recs := make([]*kgo.Record, 0, batch)
				for i := from; i < min(from+batch, total); i++ {
					recs = append(recs, &kgo.Record{
						Topic:     topic,
						Partition: int32(i % layoutPartitions),
						Key:       fmt.Appendf(nil, "k/%d", i%5),
						Value:     fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", 200)),
						Timestamp: base.Add(time.Duration((i/layoutPartitions)*7919%4) * time.Hour),
					})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					return fmt.Errorf("producing records %d..: %w", from, err)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
			}
			return nil
		}()
	}()
	return done
}

// readLayoutValues reads every data file under dir (not the ledger, not
// temp files), whatever its name, and counts each record's "i", found in
// the line itself or in its "value".
func readLayoutValues(t *testing.T, dir string) (map[int]int, int) {
	t.Helper()
	seen := map[int]int{}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), "_") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		files++
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r io.Reader = bytes.NewReader(data)
		if strings.HasSuffix(path, ".zst") {
			zr, err := zstd.NewReader(r)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			defer zr.Close()
			r = zr
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var line struct {
				I     *int `json:"i"`
				Value *struct {
					I int `json:"i"`
				} `json:"value"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			switch {
			case line.I != nil:
				seen[*line.I]++
			case line.Value != nil:
				seen[line.Value.I]++
			default:
				return fmt.Errorf("%s: a line without i: %s", path, sc.Text())
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen, files
}
