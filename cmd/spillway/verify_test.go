package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/testkit"
)

// TestVerify drains a topic, then checks `spillway verify` on consistent
// storage (exit 0), with a file stored twice (duplicates, exit 1) and with a
// file missing (a gap below the committed offset, exit 1).
func TestVerify(t *testing.T) {
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 2_000, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	end := testkit.EndOffsets(t, cl, "events")
	dir := t.TempDir()
	yaml := fmt.Sprintf(`kafka: {brokers: [%q], group: verify-test, topics: [events]}
storage: {url: "file://%s"}
file: {max_records: 250, max_age: 1s}
admin: {listen: ""}
backpressure: {memory_limit: 128MiB}
`, cluster.Addrs()[0], dir)
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), runner.Options{}) }()
	deadline := time.Now().Add(time.Minute)
	for !maps.Equal(testkit.CommittedOffsets(t, cl, "verify-test", "events"), end) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("committed offsets never reached the end offsets")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	code, out, errOut := cli(t, nil, "verify", "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "events/0: ok") || !strings.Contains(out, "2 partitions: storage is consistent with Kafka") {
		t.Fatalf("verify output:\n%s", out)
	}

	// The same records under a second name: duplicates.
	data, err := os.ReadFile(filepath.Join(dir, "events-0-250.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "events-0-251.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, nil, "verify", "--config", cfgPath, "--json")
	wantCode(t, code, exitRuntime, out, errOut)
	if !strings.Contains(out, `"duplicates": 250`) || !strings.Contains(errOut, "not consistent") {
		t.Fatalf("verify --json with a duplicated file:\n%s\n%s", out, errOut)
	}

	// A file lost: a gap below the committed offset.
	if err := os.Remove(filepath.Join(dir, "events-0-251.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "events-1-500.jsonl")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, nil, "verify", "--config", cfgPath)
	wantCode(t, code, exitRuntime, out, errOut)
	if !strings.Contains(out, "events/1: INCONSISTENT") || !strings.Contains(out, "gaps [500,750)") {
		t.Fatalf("verify with a missing file:\n%s", out)
	}
}
