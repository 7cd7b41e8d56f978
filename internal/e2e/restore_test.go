package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

const (
	restorePartitions = 2
	restoreRecords    = 60_000
)

// TestRestoreSIGKILL drains a topic with `spillway run`, then SIGKILLs
// `spillway restore` twice while it produces, each time once the
// destination holds more records (committed or not) than before, and lets
// a third run finish: a read_committed consumer finds every record of the
// source in the destination exactly once, in order, byte for byte.
func TestRestoreSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("drains and restores 60k records with two kills; skipped with -short")
	}
	bins := binariesFor(t)
	b := startBroker(t, restorePartitions, "src", "dst")
	cl := b.Client(t)
	testkit.Produce(t, cl, "src", restoreRecords, func(i int) *kgo.Record {
		r := &kgo.Record{Partition: int32(i % restorePartitions), Key: []byte{0, 0xff, byte(i), byte(i >> 8)},
			Value: bytes.Repeat([]byte{byte(i), 0}, 60), Timestamp: time.UnixMilli(int64(1e12 - i*7%1000))}
		switch i % 9 {
		case 0:
			r.Key = nil
		case 1:
			r.Value = nil
		case 2:
			r.Value = []byte{}
		case 3:
			r.Headers = []kgo.RecordHeader{{Key: "a", Value: []byte{0xff}}, {Key: "a", Value: nil}}
		}
		return r
	})
	ends := testkit.EndOffsets(t, cl, "src")

	out := t.TempDir()
	config := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: restore-e2e
  topics: [src]
storage:
  url: "file://%s"
format:
  type: jsonl
  compression: zstd
  value_encoding: base64
  fields: [key, value, offset, timestamp, headers]
file:
  max_records: 5000
  max_age: 1h
backpressure:
  memory_limit: 256MiB
admin:
  listen: ""
`, b.Addr, out)
	p := startSpillway(t, config, nil)
	p.WaitRunning(t)
	testkit.Eventually(t, "the sink committing the end of src", func() bool {
		return maps.Equal(testkit.CommittedOffsets(t, cl, "restore-e2e", "src"), ends)
	})
	p.Signal(t, syscall.SIGTERM)
	if st := p.Wait(t, 2*time.Minute); !st.Success() {
		t.Fatalf("spillway run: %s", describeExit(st))
	}

	cfgPath := filepath.Join(t.TempDir(), "spillway.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	dstEnd := func() int64 {
		var n int64
		for _, o := range testkit.EndOffsets(t, cl, "dst") {
			n += o
		}
		return n
	}
	for kill := range 3 {
		logPath := filepath.Join(t.TempDir(), "restore.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bins.spillway, "restore", "--config", cfgPath, "--to-topic", "dst", "--txn-bytes", "16KiB")
		cmd.Stdout, cmd.Stderr = logFile, logFile
		before := dstEnd()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait(); logFile.Close() }()
		if kill < 2 {
			// Kill once the destination grew by 2,000 records (and
			// markers) past where this run started: mid-restore. The
			// mark is small against what is left (tens of thousands),
			// and the transactions are small (16 KiB, a few hundred of
			// them), so that a restore takes seconds, not the 0.4 s it
			// took in 22 transactions of 256 KiB: then a second run
			// twice went from below the mark to done between two looks
			// of this loop (10 ms and a request, far longer beside a
			// CPU hog).
			testkit.Eventually(t, "restore producing", func() bool {
				select {
				case err := <-done:
					t.Fatalf("restore %d ended before it could be killed (%v): not a test; its log:\n%s", kill, err, tail(logPath, 20))
				default:
				}
				return dstEnd() >= before+2_000
			})
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			t.Logf("killed restore %d with the destination at %d offsets", kill, dstEnd())
			continue
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the last restore: %v; its log:\n%s", err, tail(logPath, 20))
			}
		case <-time.After(5 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the last restore did not end within 5 minutes; its log:\n%s", tail(logPath, 20))
		}
	}

	want := readTopic(t, b, "src", false)
	got := readTopic(t, b, "dst", true)
	for part := range int32(restorePartitions) {
		if len(got[part]) != len(want[part]) {
			t.Errorf("dst/%d holds %d records read_committed, want %d", part, len(got[part]), len(want[part]))
			continue
		}
		for i, w := range want[part] {
			g := got[part][i]
			if !sameBytesE2E(w.Key, g.Key) || !sameBytesE2E(w.Value, g.Value) || w.Timestamp.UnixMilli() != g.Timestamp.UnixMilli() || len(w.Headers) != len(g.Headers) {
				t.Fatalf("dst/%d record %d: %+v, want %+v", part, i, g, w)
			}
			for h := range w.Headers {
				if w.Headers[h].Key != g.Headers[h].Key || !sameBytesE2E(w.Headers[h].Value, g.Headers[h].Value) {
					t.Fatalf("dst/%d record %d header %d: %+v, want %+v", part, i, h, g.Headers[h], w.Headers[h])
				}
			}
		}
	}
}

func sameBytesE2E(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// readTopic reads every partition of topic up to a sentinel record
// produced now at its end (read_committed when committed is set), so
// that all that came before, duplicates included, is read.
func readTopic(t *testing.T, b *broker, topic string, committed bool) map[int32][]*kgo.Record {
	t.Helper()
	const sentinel = "e2e-restore-sentinel"
	testkit.Produce(t, b.Client(t), topic, restorePartitions, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i), Headers: []kgo.RecordHeader{{Key: sentinel}}}
	})
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := b.Client(t, opts...)
	got := map[int32][]*kgo.Record{}
	seen := map[int32]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for len(seen) < restorePartitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %v", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case len(r.Headers) == 1 && r.Headers[0].Key == sentinel:
				seen[r.Partition] = true
			case !seen[r.Partition]:
				got[r.Partition] = append(got[r.Partition], r)
			}
		})
	}
	return got
}
