package main

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

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// drainOnce runs the pipeline of the config at cfgPath until the group's
// commit reaches the log end, then stops it gracefully.
func drainOnce(t *testing.T, cl *kgo.Client, cfgPath string) {
	t.Helper()
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	drainConfig(t, cl, cfg, testkit.EndOffsets(t, cl, "events"))
}

// drainConfig runs cfg's pipeline until the group's commit of events
// reaches end, then stops it gracefully.
func drainConfig(t *testing.T, cl *kgo.Client, cfg *config.Config, end map[int32]int64) {
	t.Helper()
	drainTopic(t, cl, cfg, "events", end)
}

// TestSkipIsRecorded: skipping records on purpose is a ledger entry with
// the operator's reason, which resume starts after and verify lists
// without failing; a skip without a reason is a usage error. Moving the
// group's offset alone no longer skips anything (the ledger is the truth),
// so this is the one way to skip.
func TestSkipIsRecorded(t *testing.T) {
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	gen := func(base int) func(int) *kgo.Record {
		return func(i int) *kgo.Record { return &kgo.Record{Value: fmt.Appendf(nil, `{"i":%d}`, base+i)} }
	}
	testkit.Produce(t, cl, "events", 1000, gen(0))
	dir := t.TempDir()
	cfgPath := verifyConfig(t, cluster.Addrs()[0], dir)
	drainOnce(t, cl, cfgPath)
	testkit.Produce(t, cl, "events", 500, gen(1000))

	code, out, errOut := cli(t, nil, "skip", "--config", cfgPath, "--topic", "events", "--partition", "0", "--to", "1250")
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "skip without a reason", errOut, "--reason")

	code, out, errOut = cli(t, nil, "skip", "--config", cfgPath, "--topic", "events", "--partition", "0", "--to", "1250", "--reason", "poison batch, ticket 42")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "skip output", out, "events/0: skipped [1000,1250) (250 offsets)", "the group's offset is 1250")

	drainOnce(t, cl, cfgPath)
	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "skipped by operator [1000,1250)", "poison batch, ticket 42")
	testkit.AssertStoredExcept(t, testkit.ReadJSONL(t, dir), "events", 0, 1500, [2]int64{1000, 1250})
}

// TestBinaryLossIsLoud runs the real binary into the two losses a run can
// meet. Records the log deleted before they were stored: the run goes on,
// logs an ERROR, ends (exit 0) with a last line that names the loss, and
// verify exits 1 naming the offsets. A group commit past the log end of a
// partition with nothing stored: exit 1 with the fix.
func TestBinaryLossIsLoud(t *testing.T) {
	t.Run("retention", func(t *testing.T) {
		cluster := testkit.NewCluster(t, 1, "events")
		cl := cluster.Client(t)
		gen := func(base int) func(int) *kgo.Record {
			return func(i int) *kgo.Record { return &kgo.Record{Value: fmt.Appendf(nil, `{"i":%d}`, base+i)} }
		}
		testkit.Produce(t, cl, "events", 1000, gen(0))
		dir := t.TempDir()
		cfgPath := verifyConfig(t, cluster.Addrs()[0], dir)
		drainOnce(t, cl, cfgPath)
		testkit.Produce(t, cl, "events", 1000, gen(1000))
		del := kadm.Offsets{}
		del.AddOffset("events", 0, 1500, -1)
		if resp, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del); err != nil || resp.Error() != nil {
			t.Fatalf("delete records: %v %v", err, resp.Error())
		}

		p := startSpillway(t, "run", "--config", cfgPath)
		waitUntil(t, p, "the commit to reach the log end", func() bool {
			return maps.Equal(testkit.CommittedOffsets(t, cl, "verify-test", "events"), map[int32]int64{0: 2000})
		})
		code, _ := p.stop(t, syscall.SIGTERM, time.Minute)
		stderr := p.stderr.String()
		if code != exitOK {
			t.Fatalf("exit %d, want 0\nstderr:\n%s", code, stderr)
		}
		wantContains(t, "stderr", stderr, "level=ERROR", "deleted from the log before Spillway stored them", "offsets=[1000,1500)")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		wantContains(t, "the last line", lines[len(lines)-1], "level=ERROR", "offsets_lost=500")

		code, out, errOut := verifyCLI(t, dir, "--config", cfgPath)
		wantCode(t, code, exitRuntime, out, errOut)
		wantContains(t, "verify output", out, "LOST [1000,1500)", "deleted from the log before Spillway stored them")
	})
	t.Run("commit past the log end", func(t *testing.T) {
		cluster := testkit.NewCluster(t, 1, "events")
		cl := cluster.Client(t)
		testkit.Produce(t, cl, "events", 100, func(i int) *kgo.Record { return &kgo.Record{Value: []byte(`{}`)} })
		offs := kadm.Offsets{}
		offs.AddOffset("events", 0, 90_000, -1)
		if resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "verify-test", offs); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
		p := startSpillway(t, "run", "--config", verifyConfig(t, cluster.Addrs()[0], t.TempDir()))
		select {
		case <-p.done:
		case <-time.After(waitDeadline):
			t.Fatalf("spillway still runs after %v\nstderr:\n%s", waitDeadline, p.stderr.String())
		}
		if code := p.cmd.ProcessState.ExitCode(); code != exitRuntime {
			t.Fatalf("exit %d, want 1\nstderr:\n%s", code, p.stderr.String())
		}
		wantContains(t, "stderr", p.stderr.String(), "events/0 is 90000, past the log end 100", "--reset-offsets")
	})
}
