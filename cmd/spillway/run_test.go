package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// Generous bounds: they only stop a broken test from hanging. No assertion
// here depends on how fast the machine is.
const (
	waitDeadline = 90 * time.Second
	// exitGrace is how long past shutdown.timeout we wait for the process
	// to exit before calling it hung (process start-up and scheduling on a
	// loaded machine under -race).
	exitGrace = 30 * time.Second
)

// syncBuffer is a bytes.Buffer safe for the exec copier goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running spillway process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{} // closed when the process has exited
	waitErr        error         // valid after done
}

// childEnv is the test's environment without SPILLWAY_* variables (the test
// runner sets SPILLWAY_TEST_REQUIRE_TOOLS, which spillway would reject as an
// unknown key), with the AWS metadata probe off, and halting on a data race
// when the binary is built with -race.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPILLWAY_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_EC2_METADATA_DISABLED=true", "GORACE=halt_on_error=1")
	return append(env, extra...)
}

// startSpillway starts the binary with args. The process is killed at the
// test's cleanup if it is still running.
func startSpillway(t *testing.T, args ...string) *proc {
	t.Helper()
	return startSpillwayEnv(t, childEnv(), args...)
}

// startSpillwayEnv is startSpillway with the child's whole environment given.
func startSpillwayEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	bin := spillwayBinary(t)
	p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = t.TempDir()
	p.cmd.Env = env
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits up to within for the exit. It returns the exit
// code and how long the stop took.
func (p *proc) stop(t *testing.T, sig syscall.Signal, within time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil && !p.exited() {
		t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-p.done:
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("spillway did not exit within %v of %v\nstderr:\n%s", within, sig, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

// waitUntil polls cond until it holds, failing if the deadline passes or the
// process exits first.
func waitUntil(t *testing.T, p *proc, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !cond() {
		if p.exited() {
			t.Fatalf("spillway exited (%v) while waiting for %s\nstderr:\n%s", p.waitErr, what, p.stderr.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s\nstderr:\n%s", waitDeadline, what, p.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type runConfig struct {
	brokers  []string
	out      string
	group    string
	shutdown time.Duration
	maxAge   time.Duration // 0: the default
}

func writeRunConfig(t *testing.T, c runConfig) string {
	t.Helper()
	brokers, _ := json.Marshal(c.brokers) // a JSON list is a YAML flow list
	maxAge := ""
	if c.maxAge > 0 {
		maxAge = "\n  max_age: " + c.maxAge.String()
	}
	yaml := fmt.Sprintf(`kafka:
  brokers: %s
  topics: [events]
  group: %s
storage:
  url: file://%s
file:
  max_records: 1000%s
format:
  compression: gzip
admin:
  listen: ""
shutdown:
  timeout: %s
backpressure:
  memory_limit: 256MiB
`, brokers, c.group, c.out, maxAge, c.shutdown)
	return writeFile(t, "spillway.yaml", yaml)
}

const (
	testTopic  = "events"
	partitions = 4
)

// produceBatch produces n records {"i":N} for N in [base, base+n), record N
// to partition N%4. With base and n multiples of 4, record N lands at offset
// N/4 of its partition, so offset o of partition p holds {"i":4*o+p}.
func produceBatch(t *testing.T, cl *kgo.Client, base, n int) {
	t.Helper()
	testkit.Produce(t, cl, testTopic, n, func(i int) *kgo.Record {
		N := base + i
		return &kgo.Record{Partition: int32(N % partitions), Value: fmt.Appendf(nil, `{"i":%d}`, N)}
	})
}

// checkStored checks the output after a clean stop: no temporary files left,
// every record stored once over [0, committed) of each partition and nothing
// else, committed == the max stored offset + 1 exactly, and each record's
// value is the one produced at its offset. It returns the stored records.
func checkStored(t *testing.T, out string, committed, end map[int32]int64) []testkit.StoredRecord {
	t.Helper()
	_ = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".spillway-tmp-") {
			t.Errorf("temporary file left after a clean stop: %s", path)
		}
		return nil
	})
	recs := testkit.ReadJSONL(t, out)
	nextStored := map[int32]int64{}
	for _, r := range recs {
		if r.Topic != testTopic {
			t.Errorf("record of unexpected topic %q in %s", r.Topic, r.File)
			continue
		}
		nextStored[r.Partition] = max(nextStored[r.Partition], r.Offset+1)
		var v struct{ I *int64 }
		if err := json.Unmarshal(r.Value, &v); err != nil || v.I == nil {
			// Tolerate a value written as a JSON string holding the JSON.
			var s string
			if json.Unmarshal(r.Value, &s) != nil || json.Unmarshal([]byte(s), &v) != nil || v.I == nil {
				t.Errorf("%s:%d: value %s is not {\"i\":N}", r.File, r.Line, r.Value)
				continue
			}
		}
		if want := 4*r.Offset + int64(r.Partition); *v.I != want {
			t.Errorf("%s:%d: partition %d offset %d holds i=%d, want %d", r.File, r.Line, r.Partition, r.Offset, *v.I, want)
		}
	}
	if !maps.Equal(committed, nextStored) {
		t.Errorf("committed offsets %v != max stored offset + 1 per partition %v", committed, nextStored)
	}
	ranges := map[int32][2]int64{}
	for p, c := range committed {
		ranges[p] = [2]int64{0, c}
		if c > end[p] {
			t.Errorf("partition %d: committed %d beyond the end offset %d", p, c, end[p])
		}
	}
	testkit.AssertExactlyOnceRanges(t, recs, testTopic, ranges)
	return recs
}

// TestBinaryRunGracefulStopExactlyOnce runs the real binary three times on one
// group and one output directory: stopped by SIGTERM and by SIGINT while
// records are in flight, then drained. After every stop, storage holds each
// record up to the committed offset exactly once and nothing beyond it; at the
// end, storage holds every produced record exactly once.
func TestBinaryRunGracefulStopExactlyOnce(t *testing.T) {
	spillwayBinary(t)
	const shutdown = 20 * time.Second
	cluster := testkit.NewCluster(t, partitions, testTopic)
	cl := cluster.Client(t)
	out := t.TempDir()
	cfg := writeRunConfig(t, runConfig{brokers: cluster.Addrs(), out: out, group: "spillway-cli-test", shutdown: shutdown})
	committed := func() map[int32]int64 { return testkit.CommittedOffsets(t, cl, "spillway-cli-test", testTopic) }
	end := func() map[int32]int64 { return testkit.EndOffsets(t, cl, testTopic) }
	allCommitted := func() bool { return maps.Equal(committed(), end()) }
	stopOK := func(p *proc, sig syscall.Signal) {
		t.Helper()
		code, took := p.stop(t, sig, shutdown+exitGrace)
		t.Logf("%v: exit %d after %v", sig, code, took.Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("exit code %d after %v, want 0\nstderr:\n%s", code, sig, p.stderr.String())
		}
		if strings.Contains(p.stderr.String(), "DATA RACE") {
			t.Fatalf("data race in spillway:\n%s", p.stderr.String())
		}
	}

	// Run 1: drain 20k records, then SIGTERM right after 5k more.
	produceBatch(t, cl, 0, 20_000)
	p := startSpillway(t, "run", "--config", cfg)
	waitUntil(t, p, "run 1 to commit the first 20000 records", allCommitted)
	produceBatch(t, cl, 20_000, 5_000)
	stopOK(p, syscall.SIGTERM)
	c1, e1 := committed(), end()
	t.Logf("run 1: committed %v of %v", c1, e1)
	checkStored(t, out, c1, e1)
	if t.Failed() {
		t.FailNow()
	}

	// Run 2 (restart): 5k more; SIGINT as soon as it has made progress,
	// with records still in open files.
	p = startSpillway(t, "run", "--config", cfg)
	produceBatch(t, cl, 25_000, 5_000)
	waitUntil(t, p, "run 2 to commit past run 1", func() bool {
		c := committed()
		for part, off := range c {
			if off > c1[part] {
				return true
			}
		}
		return false
	})
	stopOK(p, syscall.SIGINT)
	c2, e2 := committed(), end()
	t.Logf("run 2: committed %v of %v", c2, e2)
	checkStored(t, out, c2, e2)
	if t.Failed() {
		t.FailNow()
	}

	// Run 3 (restart): 4k more, drain everything, SIGTERM: every produced
	// record is stored exactly once and committed. file.max_age is short here
	// so that the last, partly filled files are flushed without a stop.
	drainCfg := writeRunConfig(t, runConfig{brokers: cluster.Addrs(), out: out, group: "spillway-cli-test", shutdown: shutdown, maxAge: time.Second})
	p = startSpillway(t, "run", "--config", drainCfg)
	waitUntil(t, p, "run 3 to start", func() bool { return strings.Contains(p.stderr.String(), "spillway running") })
	produceBatch(t, cl, 30_000, 4_000)
	waitUntil(t, p, "run 3 to commit every record", allCommitted)
	stopOK(p, syscall.SIGTERM)
	c3, e3 := committed(), end()
	var total int64
	for _, n := range e3 {
		total += n
	}
	if total != 34_000 {
		t.Fatalf("end offsets %v sum to %d, want 34000", e3, total)
	}
	recs := checkStored(t, out, c3, e3)
	testkit.AssertExactlyOnce(t, recs, testTopic, e3)
	if !maps.Equal(c3, e3) {
		t.Errorf("run 3: committed %v, want the end offsets %v", c3, e3)
	}
}

// TestBinaryRunUnreachableBroker: with no broker listening, spillway keeps
// retrying (it does not exit on its own: a broker may come up later), logs the
// address it can't reach, and a SIGTERM still stops it cleanly within
// shutdown.timeout. Exiting non-zero on its own is not what it does, so that
// is not asserted.
func TestBinaryRunUnreachableBroker(t *testing.T) {
	spillwayBinary(t)
	// A port where nothing listens: bind one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const shutdown = 2 * time.Second
	cfg := writeRunConfig(t, runConfig{brokers: []string{addr}, out: t.TempDir(), group: "g", shutdown: shutdown})
	p := startSpillway(t, "run", "--config", cfg)
	waitUntil(t, p, "a connection error naming "+addr, func() bool {
		s := p.stderr.String()
		return strings.Contains(s, "unable to open connection to broker") && strings.Contains(s, addr)
	})
	code, took := p.stop(t, syscall.SIGTERM, shutdown+exitGrace)
	t.Logf("SIGTERM: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit code %d, want 0 (nothing to flush)\nstderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "stopped cleanly") {
		t.Errorf("no clean-stop log line:\n%s", p.stderr.String())
	}
}

// TestBinaryConfigErrorExit2 checks the exit code and message of the real
// process (not just run's return value) for a bad config.
func TestBinaryConfigErrorExit2(t *testing.T) {
	spillwayBinary(t)
	path := writeFile(t, "c.yaml", "kafka:\n  topcs: [events]\nstorage:\n  url: file:///x\n")
	p := startSpillway(t, "run", "--config", path)
	select {
	case <-p.done:
	case <-time.After(waitDeadline):
		t.Fatal("spillway run with a bad config did not exit")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != exitUsage {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", code, exitUsage, p.stderr.String())
	}
	wantContains(t, "stderr", p.stderr.String(), "kafka.topcs: unknown key; did you mean kafka.topics?")
}
