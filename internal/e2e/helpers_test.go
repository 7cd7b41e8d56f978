package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/testkit"
)

// Every test here is t.Parallel: each starts its own broker process, its
// own spillway processes, memory cgroups and directories, and shares
// nothing but the binaries below. Most of a test's time is spent waiting
// (a producer's pauses, kills and restarts, group joins, a frozen process's
// session timeout), so run side by side they fill the machine's cores
// instead of leaving one idle; a cgroup's limit binds its own processes
// whatever runs beside them. scripts/test.sh runs them 4 at a time.
//
// binDir holds the binaries built for this run; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "spillway-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir for binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// built builds the spillway binary, the kfakebroker binary, the backlog
// producer (testdata/backlog) and the output readers (testkit/readjsonl,
// testdata/readparquet) in one go build, once per test binary run, on
// first use (so that a -short run that skips every heavy test pays for no
// build). They are built without -race, whatever the tests run with: the
// race detector would change the memory the process uses.
var built = sync.OnceValues(func() (binaries, error) {
	b := binaries{
		spillway:    filepath.Join(binDir, "spillway"),
		broker:      filepath.Join(binDir, "kfakebroker"),
		backlog:     filepath.Join(binDir, "backlog"),
		readJSONL:   filepath.Join(binDir, "readjsonl"),
		readParquet: filepath.Join(binDir, "readparquet"),
	}
	return b, testkit.GoBuildInto(binDir,
		"github.com/spillway/spillway/cmd/spillway",
		"github.com/spillway/spillway/internal/testkit/kfakebroker",
		"github.com/spillway/spillway/internal/e2e/testdata/backlog",
		testkit.ReadJSONLProgram,
		"github.com/spillway/spillway/internal/e2e/testdata/readparquet",
	)
})

type binaries struct{ spillway, broker, backlog, readJSONL, readParquet string }

func binariesFor(t testing.TB) binaries {
	t.Helper()
	start := time.Now()
	b, err := built()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("built spillway, kfakebroker, backlog, readjsonl and readparquet in %s", d.Round(100*time.Millisecond))
	}
	return b
}

// readStoredOffsets is testkit.ReadStoredOffsets, through this run's
// readjsonl.
func readStoredOffsets(t testing.TB, root string) []testkit.StoredRecord {
	t.Helper()
	return testkit.ReadStoredOffsets(t, binariesFor(t).readJSONL, root)
}

// ---------------------------------------------------------------- broker --

// broker is a kfakebroker process. It outlives any spillway process of the
// test, and is stopped at the test's cleanup.
type broker struct {
	Addr    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// startBroker starts a one-broker kfake cluster in its own process, with the
// given topics of partitions partitions each, and waits for it to listen.
func startBroker(t testing.TB, partitions int, topics ...string) *broker {
	t.Helper()
	bins := binariesFor(t)
	dir := t.TempDir()
	b := &broker{logPath: filepath.Join(dir, "broker.log"), done: make(chan struct{})}
	logFile, err := os.Create(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	b.cmd = exec.Command(bins.broker, "-port", "0", "-partitions", strconv.Itoa(partitions),
		"-topics", strings.Join(topics, ","))
	b.cmd.Stderr = logFile
	// An os.Pipe of our own (not StdoutPipe) so that Wait may run at once:
	// Wait would close a StdoutPipe under the reader.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	b.cmd.Stdout = stdoutW
	err = b.cmd.Start()
	stdoutW.Close()
	if err != nil {
		t.Fatalf("starting kfakebroker: %v", err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { b.stop(t) })

	// The first line is "LISTEN host:port". The reader ends when the line
	// arrives or when the pipe closes (the process exited or was killed).
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(s), "LISTEN ")
		if !ok {
			t.Fatalf("kfakebroker printed %q, want \"LISTEN host:port\"; its log:\n%s", s, tail(b.logPath, 20))
		}
		b.Addr = addr
	case <-time.After(time.Minute):
		_ = b.cmd.Process.Kill()
		<-line
		t.Fatalf("kfakebroker did not print LISTEN within a minute; its log:\n%s", tail(b.logPath, 20))
	}
	t.Logf("broker listening on %s (%d partitions of %s)", b.Addr, partitions, strings.Join(topics, ","))
	return b
}

// stop asks the broker to exit (SIGTERM), and kills it if it does not
// within 30 seconds.
func (b *broker) stop(t testing.TB) {
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Logf("kfakebroker ignored SIGTERM for 30s; killing it")
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// Client returns a producer/admin client of the broker, closed at cleanup.
// Like testkit's clients it uses kgo.ManualPartitioner, so a record goes to
// the partition in its Partition field. opts come after the defaults.
func (b *broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kgo client for %s: %v", b.Addr, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceBacklog fills topic with records whose values add up to at least
// total bytes, with the testdata/backlog program (see its doc for what it
// produces: record i is at partition i%partitions, offset i/partitions). It
// returns the records and value bytes produced.
func (b *broker) produceBacklog(t testing.TB, topic string, partitions int, total int64) (records, bytes int64) {
	t.Helper()
	bins := binariesFor(t)
	cmd := exec.Command(bins.backlog, "-brokers", b.Addr, "-topic", topic,
		"-partitions", strconv.Itoa(partitions), "-bytes", strconv.FormatInt(total, 10))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("backlog producer: %v\n%s", err, stderr.String())
	}
	if _, err := fmt.Sscanf(string(out), "PRODUCED records=%d bytes=%d", &records, &bytes); err != nil {
		t.Fatalf("backlog producer printed %q: %v\n%s", out, err, stderr.String())
	}
	return records, bytes
}

// -------------------------------------------------------------- spillway --

// spillwayProc is a `spillway run --config FILE` subprocess. Its stdout and
// stderr go to one log file, whose tail is printed if the test fails. If it
// still runs at cleanup, it is killed.
type spillwayProc struct {
	cmd     *exec.Cmd
	LogPath string
	cg      *memCgroup // nil when not run under a cgroup

	done  chan struct{} // closed when the process has exited
	state *os.ProcessState

	mu        sync.Mutex
	vmHWM     int64 // the process's peak RSS (VmHWM), last seen
	cgroupRSS int64 // the cgroup's largest anonymous memory seen
	sampled   chan struct{}
}

// startSpillway writes configYAML to a file and starts `spillway run` on
// it. With cg non-nil the process runs inside that memory cgroup from its
// first instruction: a shell joins the cgroup, then execs spillway.
func startSpillway(t testing.TB, configYAML string, cg *memCgroup) *spillwayProc {
	t.Helper()
	bins := binariesFor(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "spillway.yaml")
	if err := os.WriteFile(cfgPath, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	return startProc(t, cg, filepath.Join(dir, "spillway.log"), bins.spillway, "run", "--config", cfgPath)
}

// startProc starts argv (a spillway binary and its command line) with its
// stdout and stderr in the file logPath. With cg non-nil the process runs
// inside that memory cgroup from its first instruction: a shell joins the
// cgroup, then execs it. It is sampled for its peaks until it exits.
func startProc(t testing.TB, cg *memCgroup, logPath string, argv ...string) *spillwayProc {
	t.Helper()
	p := &spillwayProc{LogPath: logPath, cg: cg,
		done: make(chan struct{}), sampled: make(chan struct{})}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	args := argv
	if cg != nil {
		// $0 and "$@" carry the command, so no path needs quoting.
		args = append([]string{"/bin/sh", "-c", `echo $$ > "$CGROUP_PROCS" && exec "$0" "$@"`}, args...)
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_DISABLED=true")
	if cg != nil {
		p.cmd.Env = append(p.cmd.Env, "CGROUP_PROCS="+cg.file("cgroup.procs"))
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting spillway: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	go p.sample()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		<-p.sampled
		if t.Failed() {
			t.Logf("spillway log (%s), last lines:\n%s", p.LogPath, tail(p.LogPath, 40))
		}
	})
	return p
}

// WaitRunning waits until spillway logged that it runs: its signal handlers
// are set by then, so a SIGTERM is a graceful stop, not a kill.
func (p *spillwayProc) WaitRunning(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(p.LogPath); err == nil && bytes.Contains(b, []byte("spillway running")) {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("spillway exited before it ran: %s", describeExit(p.state))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("spillway did not log that it runs within 2m")
		}
	}
}

// runVerify runs `spillway verify --config --json` with the given config and
// returns its report and exit code.
func runVerify(t testing.TB, configYAML string) (verifyReport, int) {
	t.Helper()
	bins := binariesFor(t)
	cfgPath := filepath.Join(t.TempDir(), "spillway.yaml")
	if err := os.WriteFile(cfgPath, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.spillway, "verify", "--config", cfgPath, "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("spillway verify: %v", err)
		}
		code = ee.ExitCode()
	}
	var r verifyReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("spillway verify (exit %d) printed no JSON report: %v\nstdout: %s\nstderr: %s", code, err, out, stderr.String())
	}
	return r, code
}

// verifyReport is the part of `spillway verify --json` the tests read.
type verifyReport struct {
	OK         bool `json:"ok"`
	Partitions []struct {
		Partition  int32      `json:"partition"`
		Records    int64      `json:"records"`
		Ranges     [][2]int64 `json:"stored_ranges"`
		Gaps       [][2]int64 `json:"gaps"`
		Duplicates int64      `json:"duplicates"`
		Committed  int64      `json:"committed_offset"`
		End        int64      `json:"end_offset"`
		OK         bool       `json:"ok"`
	} `json:"partitions"`
}

// checkVerify asserts that `spillway verify` finds every record of the
// topic stored exactly once and committed.
func checkVerify(t testing.TB, configYAML string, ends map[int32]int64) {
	t.Helper()
	r, code := runVerify(t, configYAML)
	if code != 0 || !r.OK {
		t.Errorf("spillway verify: exit %d, ok=%v: %+v", code, r.OK, r.Partitions)
	}
	if len(r.Partitions) != len(ends) {
		t.Errorf("spillway verify reports %d partitions, want %d", len(r.Partitions), len(ends))
	}
	var records int64
	for _, p := range r.Partitions {
		records += p.Records
		if p.Duplicates != 0 || len(p.Gaps) != 0 || p.Committed != ends[p.Partition] || p.End != ends[p.Partition] {
			t.Errorf("spillway verify, partition %d: %+v, want end and committed %d, no gaps or duplicates", p.Partition, p, ends[p.Partition])
		}
	}
	t.Logf("spillway verify: exit %d, %d partitions, %d records, ok=%v", code, len(r.Partitions), records, r.OK)
}

// tempFiles lists the temporary files a writer left in dir.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// A probe's temp file of a start killed during its storage check
		// is not a record's: the next start removes it once older than
		// the check can run (storage.PreflightTimeout).
		if strings.HasPrefix(d.Name(), ".spillway-tmp-") && !strings.HasPrefix(d.Name(), ".spillway-tmp-.spillway-preflight-") {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	return found
}

// sample records the process's VmHWM and the cgroup's anonymous memory
// every 100ms until the process exits: /proc/PID is gone after that.
func (p *spillwayProc) sample() {
	defer close(p.sampled)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		hwm := procStatusKiB(p.cmd.Process.Pid, "VmHWM") << 10
		var rss int64
		if p.cg != nil {
			rss = p.cg.anon()
		}
		p.mu.Lock()
		p.vmHWM = max(p.vmHWM, hwm)
		p.cgroupRSS = max(p.cgroupRSS, rss)
		p.mu.Unlock()
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
	}
}

// Peaks returns the process's peak resident set (VmHWM) and the largest
// anonymous memory seen in its cgroup (0 without one), as sampled so far.
func (p *spillwayProc) Peaks() (vmHWM, cgroupAnon int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.vmHWM, p.cgroupRSS
}

// RSS is the process's current resident set, or 0 once it has exited.
func (p *spillwayProc) RSS() int64 { return procStatusKiB(p.cmd.Process.Pid, "VmRSS") << 10 }

// Done is closed when the process has exited.
func (p *spillwayProc) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process.
func (p *spillwayProc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to spillway: %v", sig, err)
	}
}

// Wait waits up to timeout for the process to exit and returns how it
// ended; after timeout it kills the process and fails the test.
func (p *spillwayProc) Wait(t testing.TB, timeout time.Duration) *os.ProcessState {
	t.Helper()
	select {
	case <-p.done:
		return p.state
	default:
	}
	select {
	case <-p.done:
		return p.state
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("spillway did not exit within %s; killed it", timeout)
		return nil
	}
}

// describeExit says how a process ended, in the words of a shell too: a
// SIGKILL (what the kernel's OOM killer sends) is "exit status 137" there.
func describeExit(st *os.ProcessState) string {
	if st == nil {
		return "still running"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d, %v (exit status %d in a shell)", int(ws.Signal()), ws.Signal(), 128+int(ws.Signal()))
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

// procStatusKiB reads a "Name:  N kB" line of /proc/PID/status, or 0.
func procStatusKiB(pid int, name string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// tail returns the last n lines of a file (read from its last 256 KiB).
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const window = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(st.Size()-window, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---------------------------------------------------------------- cgroup --

// memCgroup is a fresh memory cgroup with a hard limit, a child of the test
// process's own cgroup: cgroup v1 (memory.limit_in_bytes) or v2
// (memory.max). The kernel OOM-kills a process in it that goes over the
// limit, as in a container. It is removed at cleanup, after the processes
// started in it (register those after creating it, so their cleanup runs
// first).
type memCgroup struct {
	dir   string
	v2    bool
	limit int64
}

// cgroupParentEnv names a cgroup to create the test's cgroups in, instead of
// the test process's own. cgroup v2 needs it: a cgroup that holds processes
// (the test's own) can't enable the memory controller for its children.
// scripts/test.sh sets it up and exports it.
const cgroupParentEnv = "SPILLWAY_TEST_CGROUP_PARENT"

// newMemCgroup creates the cgroup, or skips the test with the reason when
// this machine offers no writable memory controller. Under
// SPILLWAY_TEST_REQUIRE_TOOLS=1 (CI) it fails instead: these tests are what
// bounds spillway's memory, so CI must run them. Any other failure fails the
// test.
func newMemCgroup(t testing.TB, limit int64) *memCgroup {
	t.Helper()
	if os.Getenv(testkit.RequireToolsEnv) == "1" {
		t = noSkip{t}
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no memory cgroup to limit spillway with: /proc/self/cgroup: %v", err)
	}
	name := fmt.Sprintf("spillway-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	c := &memCgroup{limit: limit}
	var parent string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c.v2 = true
		for line := range strings.Lines(string(self)) {
			if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
				parent = filepath.Join("/sys/fs/cgroup", p)
			}
		}
	} else {
		for line := range strings.Lines(string(self)) {
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) == 3 && hasController(parts[1], "memory") {
				parent = filepath.Join("/sys/fs/cgroup/memory", parts[2])
			}
		}
	}
	if p := os.Getenv(cgroupParentEnv); p != "" {
		parent = p
	}
	if parent == "" {
		t.Skipf("no memory cgroup to limit spillway with: /proc/self/cgroup names no memory controller (cgroup v2: %v):\n%s", c.v2, self)
	}
	c.dir = filepath.Join(parent, name)
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		if notWritable(err) {
			t.Skipf("memory cgroup %s is not writable here, so the kernel can't enforce a limit on spillway: %v", parent, err)
		}
		t.Fatalf("creating memory cgroup: %v", err)
	}
	t.Cleanup(func() { c.remove(t) })

	limitFile := "memory.limit_in_bytes"
	if c.v2 {
		limitFile = "memory.max"
		if _, err := os.Stat(c.file(limitFile)); err != nil {
			// The memory controller is not enabled for children of parent.
			// Enabling it fails where parent holds processes itself (the "no
			// internal processes" rule) or is not delegated to us.
			if werr := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0o644); werr != nil {
				t.Skipf("cgroup v2: the memory controller is not enabled below %s and can't be (%v), so the kernel can't enforce a limit on spillway", parent, werr)
			}
			if _, err := os.Stat(c.file(limitFile)); err != nil {
				t.Skipf("cgroup v2: no %s in %s after enabling +memory: %v", limitFile, c.dir, err)
			}
		}
	}
	if err := os.WriteFile(c.file(limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		if notWritable(err) {
			t.Skipf("memory cgroup %s: %s is not writable here: %v", c.dir, limitFile, err)
		}
		t.Fatalf("memory cgroup: setting %s: %v", limitFile, err)
	}
	if got := c.read(limitFile); got != limit {
		t.Fatalf("memory cgroup: %s reads %d after writing %d", c.file(limitFile), got, limit)
	}
	return c
}

// noSkip turns a skip into a failure that says what the machine needs.
type noSkip struct{ testing.TB }

func (n noSkip) Skipf(format string, args ...any) {
	n.TB.Helper()
	n.TB.Fatalf("%s=1, but: "+format+"\n"+
		"The bounded-memory tests need a memory cgroup they can create children in. "+
		"Run ./scripts/test.sh as root: it sets one up (cgroup v2: a cgroup with +memory in its cgroup.subtree_control, exported as %s; "+
		"cgroup v1: the test's own cgroup under /sys/fs/cgroup/memory). "+
		"In a container, /sys/fs/cgroup must be writable (--privileged, or a delegated cgroup namespace).",
		append(append([]any{testkit.RequireToolsEnv}, args...), cgroupParentEnv)...)
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

func notWritable(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) ||
		errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EPERM)
}

func (c *memCgroup) file(name string) string { return filepath.Join(c.dir, name) }

// read reads a file holding one number ("max" reads as -1), or -1.
func (c *memCgroup) read(name string) int64 {
	b, err := os.ReadFile(c.file(name))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// keyed reads one key of a "key value" file (memory.stat, memory.events,
// memory.oom_control), or -1.
func (c *memCgroup) keyed(name, key string) int64 {
	b, err := os.ReadFile(c.file(name))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// Peak is the cgroup's peak memory use: v1 memory.max_usage_in_bytes, v2
// memory.peak (-1 on kernels before 5.19). Both count the page cache of
// files the processes wrote, which the kernel reclaims at the limit, so
// Peak near the limit is normal for a process that writes a lot.
func (c *memCgroup) Peak() int64 {
	if c.v2 {
		return c.read("memory.peak")
	}
	return c.read("memory.max_usage_in_bytes")
}

// Usage is the cgroup's current memory use, page cache included.
func (c *memCgroup) Usage() int64 {
	if c.v2 {
		return c.read("memory.current")
	}
	return c.read("memory.usage_in_bytes")
}

// Failcnt is how often usage hit the limit: v1 memory.failcnt, v2 the "max"
// count of memory.events. Each hit makes the kernel reclaim (page cache
// first); it is not by itself an OOM.
func (c *memCgroup) Failcnt() int64 {
	if c.v2 {
		return c.keyed("memory.events", "max")
	}
	return c.read("memory.failcnt")
}

// OOMKills is how many processes the kernel OOM-killed in the cgroup.
func (c *memCgroup) OOMKills() int64 {
	if c.v2 {
		return c.keyed("memory.events", "oom_kill")
	}
	return c.keyed("memory.oom_control", "oom_kill")
}

// anon is the cgroup's anonymous memory now (heap, stacks: what can't be
// reclaimed without swap): v1 "rss", v2 "anon" of memory.stat.
func (c *memCgroup) anon() int64 {
	if c.v2 {
		return c.keyed("memory.stat", "anon")
	}
	return c.keyed("memory.stat", "rss")
}

// remove deletes the cgroup. The kernel refuses (EBUSY) while a process is
// still in it, briefly even after the process was reaped, so it retries.
func (c *memCgroup) remove(t testing.TB) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			procs, _ := os.ReadFile(c.file("cgroup.procs"))
			t.Logf("leaving memory cgroup %s behind: %v (procs: %q)", c.dir, err, bytes.TrimSpace(procs))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// drainProgress sums the records committed up to the end offsets, and
// counts the partitions fully committed.
func drainProgress(committed, ends map[int32]int64) (done int64, complete int) {
	for p, end := range ends {
		done += min(committed[p], end)
		if committed[p] == end {
			complete++
		}
	}
	return done, complete
}

// produceInBackground produces total records of about size bytes over the
// topic's partitions, in batches with short sleeps so that production
// overlaps what the test does to spillway. The channel gets the outcome.
func produceInBackground(ctx context.Context, cl *kgo.Client, topic string, partitions, total, batch, size int) <-chan error {
	done := make(chan error, 1)
	// Quoted once: %q of the pad per record is most of the producer's
	// time under -race. The values are the same bytes.
	pad := strconv.Quote(strings.Repeat("x", size))
	go func() {
		done <- func() error {
			for from := 0; from < total; from += batch {
				recs := make([]*kgo.Record, 0, batch)
				for i := from; i < min(from+batch, total); i++ {
					recs = append(recs, &kgo.Record{
						Topic:     topic,
						Partition: int32(i % partitions),
						Key:       fmt.Appendf(nil, "k-%d", i),
						Value:     fmt.Appendf(nil, `{"i":%d,"pad":%s}`, i, pad),
					})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					return fmt.Errorf("producing records %d..%d: %w", from, from+len(recs)-1, err)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
			return nil
		}()
	}()
	return done
}
