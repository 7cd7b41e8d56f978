package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/audit"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/verify"
)

// These tests are promise 6: a record Kafka held and storage lacks is
// stored, or the run stops and says why, or it is reported loudly (an
// ERROR line, a metric, the run's last line, verify exiting 1). The
// ledger, not the group's commit, is the truth of what is stored.

// runLogged runs the pipeline with its log in a buffer until want offsets
// are committed, then stops it gracefully, and returns the log.
func runLogged(t *testing.T, cl *kgo.Client, cfg *config.Config, want map[int32]int64) string {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, log, Options{}) }()
	waitCommitted(t, cl, cfg.Kafka.Group, want)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("graceful stop: %v\nlog:\n%s", err, logs.String())
	}
	return logs.String()
}

func commitAt(t *testing.T, cl *kgo.Client, group string, at int64) {
	t.Helper()
	offs := kadm.Offsets{}
	offs.AddOffset("events", 0, at, -1)
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func verifyReport(t *testing.T, cl *kgo.Client, cfg *config.Config, ext string) verify.Report {
	t.Helper()
	b, err := storage.Open(context.Background(), cfg.Storage.URL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	names, err := naming.NewNames(cfg.Storage.Prefix, cfg.File.NameTemplate, ext)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(context.Background(), b, kadm.NewClient(cl), cfg.Kafka.Group, []string{"events"}, verify.Options{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// ledgerEntries reads every ledger entry of events/0 under dir.
func ledgerEntries(t *testing.T, dir string) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	err := filepath.WalkDir(filepath.Join(dir, "_spillway", "ledger"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var e ledger.Entry
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storedThenMore stores 1,000 records of events/0 (files of 400) with a
// run that stops cleanly, then produces more records that nothing stored
// yet: where each case below begins.
func storedThenMore(t *testing.T, more int) (cl *kgo.Client, dir string, cfg *config.Config) {
	t.Helper()
	cluster := testkit.NewCluster(t, 1, "events")
	cl = cluster.Client(t)
	dir = t.TempDir()
	cfg = testConfig(cluster.Addrs(), dir)
	cfg.File.MaxRecords = 400
	testkit.Produce(t, cl, "events", 1000, oneRecord)
	runLogged(t, cl, cfg, map[int32]int64{0: 1000})
	testkit.Produce(t, cl, "events", more, func(i int) *kgo.Record { return oneRecord(1000 + i) })
	return cl, dir, cfg
}

// TestRetentionGapIsRecorded (case 1): records deleted from the log while
// Spillway was down (DeleteRecords, as retention or an unclean leader
// election would) are recorded in the ledger as a gap with its cause, not
// folded into the next file's ranges; the run logs an ERROR naming the
// offsets, counts them, ends with a line that says so, and verify fails
// naming them. Before, the next entry claimed [1000, 2000) for a file that
// starts at 1500, and verify said all was stored.
func TestRetentionGapIsRecorded(t *testing.T) {
	t.Parallel()
	// While it is down: more records, then the log start moves past the
	// ledger's end.
	cl, dir, cfg := storedThenMore(t, 1000)
	del := kadm.Offsets{}
	del.AddOffset("events", 0, 1500, -1)
	resp, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}

	logs := runLogged(t, cl, cfg, map[int32]int64{0: 2000})
	for _, want := range []string{"level=ERROR", "deleted from the log before Spillway stored them", "[1000,1500)"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the run's log does not say %q:\n%s", want, logs)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "level=ERROR") || !strings.Contains(last, "offsets_lost=500") {
		t.Errorf("the run's last line does not name the loss: %s", last)
	}

	var gaps []offsets.Gap
	for _, e := range ledgerEntries(t, dir) {
		gaps = append(gaps, e.Gaps...)
		for _, r := range e.File.Ranges {
			if r[0] < 1500 && r[1] > 1000 {
				t.Errorf("ledger entry %d's file %s claims %v, offsets the log had deleted", e.Seq, e.File.Key, e.File.Ranges)
			}
		}
	}
	if len(gaps) != 1 || gaps[0].Cause != offsets.GapRetention || offsets.FormatRanges(gaps[0].Ranges) != "[1000,1500)" {
		t.Fatalf("ledger gaps %+v, want one retention gap [1000, 1500)", gaps)
	}

	rep := verifyReport(t, cl, cfg, ".jsonl.zst")
	if rep.OK {
		t.Fatal("verify says ok, but 500 records were lost")
	}
	var lost bool
	for _, p := range rep.Partitions[0].Problems {
		if p.Kind == audit.ProblemLost && offsets.FormatRanges(p.Offsets) == "[1000,1500)" {
			lost = true
		}
	}
	if !lost || rep.ProblemCount() != 1 {
		t.Fatalf("verify problems %+v, want exactly one lost [1000, 1500)", rep.Partitions[0].Problems)
	}
	testkit.AssertStoredExcept(t, testkit.ReadJSONL(t, dir), "events", 0, 2000, [2]int64{1000, 1500})
}

// TestCommitPastLogEnd (case 2): a group commit past the log end (a reset
// tool, a truncated log, another cluster's commit). With a ledger, the run
// resumes from the ledger and stores what is there; without one, it stops
// with a message that names the partition, both offsets and the fix.
// Before, the client reset and every record below was dropped, exit 0.
func TestCommitPastLogEnd(t *testing.T) {
	t.Parallel()
	t.Run("with a ledger", func(t *testing.T) {
		t.Parallel()
		cl, dir, cfg := storedThenMore(t, 500)
		commitAt(t, cl, cfg.Kafka.Group, 90_000)
		logs := runLogged(t, cl, cfg, map[int32]int64{0: 1500})
		if !strings.Contains(logs, "past the log end") {
			t.Errorf("the run does not say the commit was past the log end:\n%s", logs)
		}
		testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", map[int32]int64{0: 1500})
	})
	t.Run("without a ledger", func(t *testing.T) {
		t.Parallel()
		cluster := testkit.NewCluster(t, 1, "events")
		cl := cluster.Client(t)
		cfg := testConfig(cluster.Addrs(), t.TempDir())
		testkit.Produce(t, cl, "events", 100, oneRecord)
		commitAt(t, cl, cfg.Kafka.Group, 90_000)
		err := runToFailure(t, cfg)
		var pe *source.CommitPastEndError
		if !errors.As(err, &pe) {
			t.Fatalf("the run stopped with %v, want a CommitPastEndError", err)
		}
		for _, want := range []string{"events/0", "90000", "log end 100", "--reset-offsets"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
}

// TestCommitAheadOfLedger (case 3): a group commit ahead of what the ledger
// holds (an operator moved it, or a connector still running during the
// cut-over committed) resumes from the ledger: the records between are
// stored, and the run says why. Before, they were written into the ledger
// as skipped and verify passed.
func TestCommitAheadOfLedger(t *testing.T) {
	t.Parallel()
	cl, dir, cfg := storedThenMore(t, 1000)
	commitAt(t, cl, cfg.Kafka.Group, 1700)
	logs := runLogged(t, cl, cfg, map[int32]int64{0: 2000})
	if !strings.Contains(logs, "ahead of what the ledger says is stored") {
		t.Errorf("the run does not say the commit was ahead of the ledger:\n%s", logs)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", map[int32]int64{0: 2000})
	if rep := verifyReport(t, cl, cfg, ".jsonl.zst"); !rep.OK {
		t.Fatalf("verify: %+v", rep)
	}
}

// TestStrayFileDoesNotMoveResume (case 4): in a prefix with no ledger, a
// file named like Spillway's whose last record says offset 499 does not
// make the run skip 500 records (storage.earlier_files defaults to none);
// a warning names it, and verify reports it without saying resume ignores
// it when resume reads it back.
func TestStrayFileDoesNotMoveResume(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Format.Compression = "none"
	stray := filepath.Join(dir, "events-0-7.jsonl")
	if err := os.WriteFile(stray, []byte(`{"key":null,"value":{"i":499},"offset":499,"timestamp":0,"headers":[]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.Produce(t, cl, "events", 1000, oneRecord)
	logs := runLogged(t, cl, cfg, map[int32]int64{0: 1000})
	if !strings.Contains(logs, "no ledger entry names it") || !strings.Contains(logs, "events-0-7.jsonl") {
		t.Errorf("the run does not warn of the stray file:\n%s", logs)
	}
	rep := verifyReport(t, cl, cfg, ".jsonl")
	if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != audit.ProblemUnknownFile ||
		!strings.Contains(rep.Problems[0].Message, "never moves where resume starts") {
		t.Errorf("verify problems %+v, want the stray file, saying it never moves where resume starts", rep.Problems)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", map[int32]int64{0: 1000})
}

// goRun runs cfg's pipeline in the background until cancel; its error
// arrives on the channel. A test that takes it puts it back, for the
// cleanup.
func goRun(t *testing.T, cfg *config.Config) (chan error, context.CancelFunc) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := testLogger(t)
	go func() { done <- Run(ctx, cfg, log, Options{}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Error("a run did not stop within 2 minutes of its cancel")
		}
	})
	return done, cancel
}

// waitMembers waits until group has members.
func waitMembers(t *testing.T, cl *kgo.Client, group string) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for {
		active, err := source.GroupActive(context.Background(), cl, group)
		if err != nil {
			t.Fatal(err)
		}
		if active {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s never had members", group)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAnotherDeploymentIsRefused: a second deployment on the same prefix
// (another group, both running) collides with the first on a ledger entry,
// and the one that loses stops with a message that names the other group
// and the fix, instead of being told another instance owns the partition.
// This one restarted with another format stops before it writes, naming
// both formats, instead of mixing them. A group that has no members any
// more (renamed, or its commits lost) takes the ledger over, with a
// warning.
func TestAnotherDeploymentIsRefused(t *testing.T) {
	t.Parallel()
	cl, _, cfg := storedThenMore(t, 0)
	// Files close at 400 records only: both deployments hold the next
	// file open until its last record arrives, then both publish it.
	cfg.File.MaxAge = time.Hour
	other := *cfg
	other.Kafka.Group = "another-deployment"

	doneA, _ := goRun(t, cfg)
	waitMembers(t, cl, cfg.Kafka.Group)
	testkit.Produce(t, cl, "events", 399, func(i int) *kgo.Record { return oneRecord(1000 + i) })
	doneB, _ := goRun(t, &other)
	waitMembers(t, cl, other.Kafka.Group)
	deadline := time.Now().Add(waitDeadline)
	for {
		got := testkit.CommittedOffsets(t, cl, other.Kafka.Group, "events")
		if got[0] == 1000 { // B resumed from the ledger
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second deployment never resumed: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	testkit.Produce(t, cl, "events", 1, func(int) *kgo.Record { return oneRecord(1399) })
	// A round of 400 records ends in a collision, unless a deployment's
	// own group rebalanced (a busy machine delays heartbeats) after the
	// other published and before it did: it then drops its file, resumes
	// after the other's, and nothing collides, which is right (storage
	// holds each record once). The next 400 records make them collide
	// again.
	var err error
	var wantGroup string
	for round, next := 1, 1400; wantGroup == ""; round++ {
		select {
		case err = <-doneA:
			wantGroup = other.Kafka.Group
			doneA <- err
		case err = <-doneB:
			wantGroup = cfg.Kafka.Group
			doneB <- err
		case <-time.After(90 * time.Second):
			committed := fmt.Sprintf("committed: group %s %v, group %s %v",
				cfg.Kafka.Group, testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"),
				other.Kafka.Group, testkit.CommittedOffsets(t, cl, other.Kafka.Group, "events"))
			if round == 3 {
				t.Fatalf("neither deployment stopped in %d rounds: they did not collide (%s)", round, committed)
			}
			t.Logf("round %d: neither deployment stopped within 90 s (%s); 400 more records", round, committed)
			testkit.Produce(t, cl, "events", 400, func(i int) *kgo.Record { return oneRecord(next + i) })
			next += 400
		}
	}
	// On a local directory, which collision comes first is a race: a
	// deployment that resumes or first flushes while the other's file is
	// open removes that file's temporary copy, as a dead writer's, and the
	// other then stops on it before any entry collides.
	named := err != nil && strings.Contains(err.Error(), fmt.Sprintf("another deployment, kafka.group %q", wantGroup))
	tempGone := err != nil && strings.Contains(err.Error(), "temporary copy") && strings.Contains(err.Error(), "another deployment writes into this directory")
	if !(named || tempGone) || !strings.Contains(err.Error(), "its own storage.prefix") {
		t.Fatalf("the deployment that lost stopped with %v, want it to name kafka.group %q (or its removed temporary file) and the fix", err, wantGroup)
	}
}

// TestAnotherFormatIsRefused: this deployment restarted with another format
// stops before it writes, naming both formats, instead of mixing them; a
// group without members (renamed) takes the ledger over, with a warning.
func TestAnotherFormatIsRefused(t *testing.T) {
	t.Parallel()
	cl, _, cfg := storedThenMore(t, 0)
	reformatted := *cfg
	reformatted.Format.Type = "csv"
	err := runToFailure(t, &reformatted)
	var de *ledger.DeploymentError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "jsonl+zstd") || !strings.Contains(err.Error(), "csv+zstd") || !strings.Contains(err.Error(), "new storage.prefix") {
		t.Errorf("another format: %v, want a DeploymentError naming both formats and the fix", err)
	}

	renamed := *cfg
	renamed.Kafka.Group = "renamed"
	testkit.Produce(t, cl, "events", 400, func(i int) *kgo.Record { return oneRecord(1000 + i) })
	logs := runLogged(t, cl, &renamed, map[int32]int64{0: 1400})
	if !strings.Contains(logs, `written by kafka.group \"sink-test\", which has no members now`) {
		t.Errorf("the renamed group's run does not say it took the ledger over:\n%s", logs)
	}
}

// TestGapNotCommittedBeforeItsEntry: the group's offset never passes
// offsets the log deleted before their ledger entry records them, so that a
// crash before that entry finds the gap again. Here storage holds nothing
// of the partition and the group's commit (200) is below the log start
// (500): while the first file is still open, the gap is logged and the
// commit stays at 200. Before, the assignment committed the log start at
// once, and a crash then passed [200, 500) in silence.
func TestGapNotCommittedBeforeItsEntry(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	cfg := testConfig(cluster.Addrs(), t.TempDir())
	cfg.File.MaxRecords = 0
	cfg.File.MaxAge = time.Hour
	testkit.Produce(t, cl, "events", 1000, oneRecord)
	commitAt(t, cl, cfg.Kafka.Group, 200)
	del := kadm.Offsets{}
	del.AddOffset("events", 0, 500, -1)
	if resp, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	var logs lockedBuffer
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})), Options{})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(waitDeadline)
	for !strings.Contains(logs.String(), "offsets=[200,500)") {
		if time.Now().After(deadline) {
			t.Fatalf("the gap was never logged:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); got[0] != 200 {
		t.Fatalf("the group's commit is %d while the gap's entry is not written, want 200", got[0])
	}
}
