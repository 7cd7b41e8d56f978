package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/testkit"
)

// These tests are the hostile cases of the stored-file contract: files in
// storage that Spillway didn't write for this topic must never make it skip
// a record or commit past the log end.

func oneRecord(i int) *kgo.Record {
	return &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, `{"i":%d}`, i)}
}

// TestResumeIgnoresForeignFile: a file that matches the name pattern but
// that Spillway never wrote (random bytes named as if it held offsets from
// 9000 on, with the log end at 2750) is ignored by resume: it is not in
// the ledger. Reading files back made resume commit 9000 and skip records.
func TestResumeIgnoresForeignFile(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.File.MaxRecords = 500

	testkit.Produce(t, cl, "events", 2500, oneRecord)
	_, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, map[int32]int64{0: 2500})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	_, _ = rand.Read(junk)
	if err := os.WriteFile(filepath.Join(dir, "events-0-9000.jsonl.zst"), junk, 0o644); err != nil {
		t.Fatal(err)
	}
	// A lost commit too, so that resume has to say where storage ends.
	cfg.Kafka.Group = "sink-test-2"
	testkit.Produce(t, cl, "events", 250, func(i int) *kgo.Record { return oneRecord(2500 + i) })
	_, stop = started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, map[int32]int64{0: 2750})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "events-0-9000.jsonl.zst")); err != nil {
		t.Fatal(err)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", map[int32]int64{0: 2750})
}

// TestRecreatedTopicStops: a prefix holding a ledger of a topic that was
// deleted and recreated (another topic id) stops the run with a message
// that names the prefix, both ids and the two ways out. With
// storage.topic_id_change: start_fresh, and the old files moved away, it
// runs.
func TestRecreatedTopicStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := testkit.NewCluster(t, 1, "events")
	ocl := old.Client(t)
	testkit.Produce(t, ocl, "events", 1000, oneRecord)
	cfg := testConfig(old.Addrs(), dir)
	_, stop := started(t, cfg)
	waitCommitted(t, ocl, cfg.Kafka.Group, map[int32]int64{0: 1000})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	oldIDs := ledgerTopicIDs(t, dir)

	// The same topic name on a new cluster: a new topic id, offsets from 0.
	fresh := testkit.NewCluster(t, 1, "events")
	fcl := fresh.Client(t)
	testkit.Produce(t, fcl, "events", 1000, oneRecord)
	cfg = testConfig(fresh.Addrs(), dir)
	err := runToFailure(t, cfg)
	var fe *ledger.ForeignError
	if !errors.As(err, &fe) {
		t.Fatalf("run over a prefix of a recreated topic: %v, want a *ledger.ForeignError", err)
	}
	for _, want := range []string{dir, oldIDs[0], fe.ID.TopicID, "storage.prefix", "storage.topic_id_change: start_fresh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if got := testkit.CommittedOffsets(t, fcl, cfg.Kafka.Group, "events"); got[0] > 0 {
		t.Errorf("committed %v after refusing the prefix, want nothing", got)
	}

	// The way out in place: move the old topic's files, start fresh.
	moved := t.TempDir()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() {
			if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(moved, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg.Storage.TopicIDChange = "start_fresh"
	_, stop = started(t, cfg)
	waitCommitted(t, fcl, cfg.Kafka.Group, map[int32]int64{0: 1000})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", map[int32]int64{0: 1000})
	if ids := ledgerTopicIDs(t, dir); len(ids) != 2 {
		t.Errorf("ledger topic ids %v, want the old and the new one side by side", ids)
	}
}

// ledgerTopicIDs lists the topic ids with a ledger for topic events.
func ledgerTopicIDs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "_spillway", "ledger", "events"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// TestDeepJSONValueIsHarmless: a valid JSON value nested 20,000 deep, which
// encoding/json can't read back, is stored, and restarts go on: resume no
// longer reads data files.
func TestDeepJSONValueIsHarmless(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	deep := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	testkit.Produce(t, cl, "events", 100, func(i int) *kgo.Record {
		if i == 99 {
			return &kgo.Record{Partition: 0, Value: []byte(deep)}
		}
		return oneRecord(i)
	})
	_, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, map[int32]int64{0: 100})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Restart after a lost commit: resume must say where storage ends.
	cfg.Kafka.Group = "sink-test-2"
	testkit.Produce(t, cl, "events", 10, func(i int) *kgo.Record { return oneRecord(100 + i) })
	_, stop = started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, map[int32]int64{0: 110})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	files := dataFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("files %v, want two: the first run's and the second's", files)
	}
}

// TestTruncatedLastFileStops: the file named by a partition's last ledger
// entry, cut short by something other than Spillway, stops the run with the
// file named and both sizes, instead of a crash loop or silent rewrite.
func TestTruncatedLastFileStops(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.File.MaxRecords = 400
	testkit.Produce(t, cl, "events", 1000, oneRecord)
	_, stop := started(t, cfg)
	waitCommitted(t, cl, cfg.Kafka.Group, map[int32]int64{0: 1000})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	files := dataFiles(t, dir)
	last := files[len(files)-1]
	info, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	testkit.Produce(t, cl, "events", 10, func(i int) *kgo.Record { return oneRecord(1000 + i) })
	err = runToFailure(t, cfg)
	for _, want := range []string{filepath.Base(last), fmt.Sprint(info.Size()), fmt.Sprint(info.Size() / 2), "restore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// runToFailure runs the pipeline until it stops by itself, and returns why.
// A run that goes on for minutes fails the test.
func runToFailure(t *testing.T, cfg *config.Config) error {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := Run(ctx, cfg, testLogger(t), Options{})
	if ctx.Err() != nil {
		t.Fatalf("the run did not stop by itself within 2 minutes (Run: %v)", err)
	}
	if err == nil {
		t.Fatal("the run stopped by itself without an error")
	}
	t.Logf("the run stopped: %v", err)
	return err
}

// dataFiles lists the data files under dir (not the ledger, not temp
// files), ordered by their start offset.
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	if err := testkit.WalkOutput(dir, func(p string) error { out = append(out, p); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		_, _, a, _ := testkit.ParseDefaultName(out[i])
		_, _, b, _ := testkit.ParseDefaultName(out[j])
		return a < b
	})
	return out
}

// TestPrefixWithoutLedger: with storage.earlier_files: spillway, files
// written before the ledger existed resume as they did, by reading the
// last file back, when they can be (offset in format.fields); when they can't, the run stops with a clear error rather
// than write them again or skip them.
func TestPrefixWithoutLedger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		fields   []string
		resumes  bool
		wantText string
	}{
		{"with offsets", []string{"key", "value", "offset"}, true, ""},
		{"value only", []string{"value"}, false, "can't be read back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := testkit.NewCluster(t, 1, "events")
			cl := cluster.Client(t)
			dir := t.TempDir()
			cfg := testConfig(cluster.Addrs(), dir)
			cfg.Format.Fields = tc.fields
			// Read back by name: unledgered files never move a resume
			// point otherwise (TestStrayFileDoesNotMoveResume).
			cfg.Storage.EarlierFiles = "spillway"
			testkit.Produce(t, cl, "events", 1000, oneRecord)
			_, stop := started(t, cfg)
			waitCommitted(t, cl, cfg.Kafka.Group, map[int32]int64{0: 1000})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			// As an earlier version left it: files, no ledger, and (a lost
			// commit) no group offsets.
			if err := os.RemoveAll(filepath.Join(dir, "_spillway")); err != nil {
				t.Fatal(err)
			}
			cfg.Kafka.Group = "sink-test-2"
			testkit.Produce(t, cl, "events", 10, func(i int) *kgo.Record { return oneRecord(1000 + i) })
			if !tc.resumes {
				err := runToFailure(t, cfg)
				if !strings.Contains(err.Error(), tc.wantText) || !strings.Contains(err.Error(), "events-0-0") {
					t.Fatalf("error %q, want it to name the file and say %q", err, tc.wantText)
				}
				return
			}
			_, stop = started(t, cfg)
			waitCommitted(t, cl, cfg.Kafka.Group, map[int32]int64{0: 1010})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", map[int32]int64{0: 1010})
		})
	}
}
