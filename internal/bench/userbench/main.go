// Command userbench measures Spillway the way a user measures it: the
// broker in its own process (kfakebroker), Spillway as the real binary,
// timed from the start of its process until the group's committed offsets
// equal the log end, against baselines run the same way on the same broker
// and data, in the same run. It prints records/s, seconds, the ratio to the
// naive writer and CPU-seconds per million records of every contender.
//
// Run it from anywhere in the module, without -race:
//
//	go run ./internal/bench/userbench
//
// Flags (or environment variables) set the size:
//
//	-records N       SPILLWAY_BENCH_RECORDS       records of the 16-partition topic (default 1,000,000)
//	-wide-records N  SPILLWAY_BENCH_WIDE_RECORDS  records of the 1,000-partition topic (default 400,000)
//	-rounds R        SPILLWAY_BENCH_ROUNDS        rounds; the table shows each contender's median (default 3)
//	-workloads LIST                               any of 16p,zstd,1000p,plain (default 16p,zstd,1000p)
//	-base DIR        also run the spillway of another checkout (spillway@base)
//	-profile DIR     a CPU profile of each Spillway run (internal/bench/spillprof)
//	-strace DIR      strace -f -c counts of each Spillway and naive run
//	-baseline-fetch  spillway (default): the baselines fetch as Spillway does
//	                 by default; kgo: with franz-go's own defaults
//
// The contenders, each a child process with its own consumer group, started
// in turn and interleaved across rounds so that the machine's drift falls on
// all alike:
//
//	raw:        a franz-go group consumer that reads to the log end and discards
//	naive:      the same consumer writing each partition's values, one per line,
//	            to files of the same record count as Spillway's, one fsync per
//	            file when it is complete
//	naive-zstd: naive through klauspost's zstd encoder at SpeedFastest
//	same-zstd:  naive through Spillway's own zstd settings (format.NewCompressor)
//	spillway:   `spillway run` (jsonl, file://, file.max_records so that every
//	            file closes by count and nothing waits for file.max_age)
//
// Every baseline commits its offsets once it has written and synced
// everything, so all contenders are timed to the same event. The baselines are
// a program of their own (./baseline), which links nothing of Spillway's but
// its zstd settings: this one links the runner, and with it iceberg-go, whose
// start costs about 0.1 s. By default they fetch as Spillway does
// with its default memory_limit (runner.MemoryPlan: fetch and per-partition
// sizes, fetches in flight), so that the ratios compare the writing, not the
// fetch settings: at 1,000 partitions franz-go's defaults (a 50 MiB fetch,
// unbounded fetches) made the raw consumer about 1 s slower on kfake, which
// flattered Spillway. -baseline-fetch kgo measures the baselines as before.
//
// A run's files stay until the end (see checkSpace).
//
// The program is never run by `go test`: it is a main package without tests.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/internal/bench/benchdata"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/runner"
)

const (
	narrowTopic      = "events"
	narrowPartitions = 16
	wideTopic        = "wide"
	plainTopic       = "plain"
	wideParts        = 1000
	valueSize        = 1024
)

func main() {
	os.Exit(run())
}

func run() int {
	records := flag.Int("records", envInt("SPILLWAY_BENCH_RECORDS", 1_000_000), "records of the 16-partition topic")
	wideRecords := flag.Int("wide-records", envInt("SPILLWAY_BENCH_WIDE_RECORDS", 400_000), "records of the 1,000-partition topic")
	rounds := flag.Int("rounds", envInt("SPILLWAY_BENCH_ROUNDS", 3), "rounds; the table shows each contender's median")
	workloads := flag.String("workloads", "16p,zstd,1000p", "comma-separated workloads: 16p, zstd, 1000p, and plain (not by default)")
	keep := flag.Bool("keep", false, "keep the work directory (every process's log) and print its path")
	deleteOutputs := flag.Bool("delete-outputs", false, "delete each run's files right after it, as before 2026-12-06 (on ext4 without a journal the runs after then pay for skipping the inodes just freed: docs/bench.md)")
	profile := flag.String("profile", "", "write a CPU profile of each Spillway run into this directory (runs internal/bench/spillprof, the same code path, in place of the binary)")
	base := flag.String("base", "", "also run the spillway built from this directory (another checkout of the module, such as the commit before a change) as the contender spillway@base")
	traces := flag.Bool("trace", false, "with -profile, also write a runtime execution trace of each Spillway run there (go tool trace: which goroutines wait, and on what)")
	straceDir := flag.String("strace", "", "count the syscalls of each Spillway and naive run with strace -c -f into this directory (slows them: read the counts, not the times)")
	baselineFetch := flag.String("baseline-fetch", "spillway", "how the baselines fetch: spillway (Spillway's default fetch sizes) or kgo (franz-go's defaults)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	if *records < narrowPartitions || *wideRecords < 2*wideParts || *rounds < 1 {
		fmt.Fprintf(os.Stderr, "userbench: want -records >= %d, -wide-records >= %d and -rounds >= 1\n", narrowPartitions, 2*wideParts)
		return 2
	}
	if *baselineFetch != "spillway" && *baselineFetch != "kgo" {
		fmt.Fprintf(os.Stderr, "userbench: -baseline-fetch %q: want spillway or kgo\n", *baselineFetch)
		return 2
	}
	want := map[string]bool{}
	for _, w := range strings.Split(*workloads, ",") {
		switch w = strings.TrimSpace(w); w {
		case "16p", "zstd", "plain", "1000p":
			want[w] = true
		default:
			fmt.Fprintf(os.Stderr, "userbench: -workloads: unknown workload %q; want 16p, zstd, plain or 1000p\n", w)
			return 2
		}
	}
	b := &bench{
		// Whole files per partition: every file closes by count.
		records:     int64(*records / narrowPartitions * narrowPartitions),
		wideRecords: int64(*wideRecords / (2 * wideParts) * (2 * wideParts)),
		rounds:      *rounds,
		want:        want,
		keep:        *keep,
		deleteOuts:  *deleteOutputs,
		profile:     *profile,
		traces:      *traces,
		strace:      *straceDir,
		baseDir:     *base,
		fetch:       *baselineFetch,
	}
	if err := b.run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "userbench: %v\n", err)
		return 1
	}
	return 0
}

func envInt(name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "userbench: %s=%q: want a positive integer\n", name, s)
		os.Exit(2)
	}
	return n
}

// ------------------------------------------------------------------ parent --

type bench struct {
	records, wideRecords int64
	rounds               int
	want                 map[string]bool
	keep                 bool
	deleteOuts           bool   // delete each run's files right after it
	profile, strace      string // directories, or ""
	traces               bool   // with profile: execution traces too
	baseDir              string // another checkout whose spillway runs too, or ""
	baseBin              string
	fetch                string   // the baselines' fetch settings: spillway or kgo
	fetchArgs            []string // the baseline's flags for them

	tmp                   string
	spillway, baselineBin string
	brokerAddr            string
	brokerPid             int
	adm                   *kadm.Client
	seq                   int
	outs                  []string // runs' file directories, removed at the end
}

// contender is one row of the table: how to start it and what it drains.
type contender struct {
	workload, name string
	topic          string
	records        int64
	start          func(ctx context.Context, group, out string) (*exec.Cmd, error)
	stop           bool // SIGTERM once caught up (Spillway runs until told to stop)
	results        []result
}

type result struct {
	wall, cpu time.Duration
	sys       time.Duration // the part of cpu spent in the kernel
	broker    time.Duration // the broker's CPU over the run
	// disk is what reached the work directory's device over the run
	// (the whole machine's, so read it on an idle one).
	disk diskStats
}

func (b *bench) run(ctx context.Context) error {
	var err error
	if b.tmp, err = os.MkdirTemp("", "userbench-"); err != nil {
		return err
	}
	if b.keep {
		fmt.Fprintf(os.Stderr, "work directory (kept, but for the runs' files): %s\n", b.tmp)
	} else {
		defer os.RemoveAll(b.tmp)
	}
	defer func() {
		for _, out := range b.outs {
			_ = os.RemoveAll(out)
		}
	}()
	if b.fetch == "spillway" {
		// The plan Spillway's default memory_limit (auto) gives in this
		// same environment: the cgroup's limit, else 1 GiB.
		plan, _, err := runner.MemoryPlan(config.Backpressure{MemoryLimit: "auto"})
		if err != nil {
			return err
		}
		b.fetchArgs = []string{"-fetch-max", strconv.Itoa(int(plan.FetchMax)),
			"-fetch-partition-max", strconv.Itoa(int(plan.FetchPartitionMax)),
			"-fetches", strconv.Itoa(plan.Fetches)}
	}

	broker, err := b.build(ctx)
	if err != nil {
		return err
	}

	stopBroker, err := b.startBroker(ctx, broker)
	if err != nil {
		return err
	}
	defer stopBroker()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokerAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	b.adm = kadm.NewClient(cl)

	cs, err := b.contenders(ctx, cl)
	if err != nil {
		return err
	}
	if err := b.checkSpace(cs); err != nil {
		return err
	}

	for r := range b.rounds {
		for _, c := range cs {
			res, err := b.measure(ctx, c)
			if err != nil {
				return fmt.Errorf("round %d, %s %s: %w", r+1, c.workload, c.name, err)
			}
			c.results = append(c.results, res)
			fmt.Fprintf(os.Stderr, "round %d: %-12s %-10s %6.2fs  cpu %6.2fs (sys %.2fs)  broker cpu %6.2fs  %s\n", r+1, c.workload, c.name, res.wall.Seconds(), res.cpu.Seconds(), res.sys.Seconds(), res.broker.Seconds(), res.disk)
		}
	}
	b.print(cs)
	return nil
}

// build compiles spillway (or spillprof, to profile it), the broker and,
// with -base, the other tree's spillway into the work directory, and
// returns the broker's path.
func (b *bench) build(ctx context.Context) (string, error) {
	t0 := time.Now()
	bin := filepath.Join(b.tmp, "bin")
	b.spillway = filepath.Join(bin, "spillway")
	b.baselineBin = filepath.Join(bin, "baseline")
	broker := filepath.Join(bin, "kfakebroker")
	spillPkg := "github.com/spillway/spillway/cmd/spillway"
	if b.profile != "" {
		spillPkg = "github.com/spillway/spillway/internal/bench/spillprof"
		if err := os.MkdirAll(b.profile, 0o755); err != nil {
			return "", err
		}
	}
	if b.strace != "" {
		if err := os.MkdirAll(b.strace, 0o755); err != nil {
			return "", err
		}
	}
	for out, pkg := range map[string]string{
		b.spillway:    spillPkg,
		broker:        "github.com/spillway/spillway/internal/testkit/kfakebroker",
		b.baselineBin: "github.com/spillway/spillway/internal/bench/userbench/baseline",
	} {
		if msg, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
		}
	}
	if b.baseDir != "" {
		b.baseBin = filepath.Join(bin, "spillway-base")
		if msg, err := exec.CommandContext(ctx, "go", "build", "-C", b.baseDir, "-o", b.baseBin, "./cmd/spillway").CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build ./cmd/spillway in %s: %w\n%s", b.baseDir, err, msg)
		}
	}
	fmt.Fprintf(os.Stderr, "built spillway, the baselines and kfakebroker in %s\n", time.Since(t0).Round(100*time.Millisecond))
	return broker, nil
}

// contenders loads the topics of the workloads asked for and lists what
// runs on each: the baselines, spillway, and the -base tree's spillway.
func (b *bench) contenders(ctx context.Context, cl *kgo.Client) ([]*contender, error) {
	var cs []*contender
	if b.want["16p"] || b.want["zstd"] {
		if err := b.load(ctx, cl, narrowTopic, narrowPartitions, b.records); err != nil {
			return nil, err
		}
		per := b.records / narrowPartitions
		cs = append(cs, b.baseline("16p jsonl", "raw", "raw", narrowTopic, b.records, per, false))
		if b.want["16p"] {
			cs = append(cs,
				b.baseline("16p jsonl", "naive", "naive", narrowTopic, b.records, per, false),
				b.spillwayRun("16p jsonl", narrowTopic, b.records, per, "none"))
			cs = append(cs, b.baseRun("16p jsonl", narrowTopic, b.records, per, "none")...)
		}
		if b.want["zstd"] {
			cs = append(cs,
				b.baseline("16p zstd", "naive-zstd", "naive", narrowTopic, b.records, per, true),
				b.baseline("16p zstd", "same-zstd", "naive", narrowTopic, b.records, per, true, "-zstd-as-spillway"),
				b.spillwayRun("16p zstd", narrowTopic, b.records, per, "zstd"))
			cs = append(cs, b.baseRun("16p zstd", narrowTopic, b.records, per, "zstd")...)
		}
	}
	if b.want["plain"] {
		// The same records, in batches the producer did not compress: the
		// consumer's fetch chain then has no decompression to do.
		plain, err := kgo.NewClient(kgo.SeedBrokers(b.brokerAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			return nil, err
		}
		more, err := b.jsonlWorkload(ctx, plain, "16p plain", plainTopic, narrowPartitions, b.records, b.records/narrowPartitions)
		plain.Close()
		if err != nil {
			return nil, err
		}
		cs = append(cs, more...)
	}
	if b.want["1000p"] {
		more, err := b.jsonlWorkload(ctx, cl, "1000p jsonl", wideTopic, wideParts, b.wideRecords, b.wideRecords/wideParts/2)
		if err != nil {
			return nil, err
		}
		cs = append(cs, more...)
	}
	return cs, nil
}

// jsonlWorkload creates topic with partitions, loads records into it
// through cl, and returns its contenders: the raw consumer, the naive
// writer, Spillway (and spillway@base) writing jsonl files of per records.
func (b *bench) jsonlWorkload(ctx context.Context, cl *kgo.Client, workload, topic string, partitions int, records, per int64) ([]*contender, error) {
	if _, err := b.adm.CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		return nil, fmt.Errorf("creating %s: %w", topic, err)
	}
	if err := b.load(ctx, cl, topic, partitions, records); err != nil {
		return nil, err
	}
	cs := []*contender{
		b.baseline(workload, "raw", "raw", topic, records, per, false),
		b.baseline(workload, "naive", "naive", topic, records, per, false),
		b.spillwayRun(workload, topic, records, per, "none"),
	}
	return append(cs, b.baseRun(workload, topic, records, per, "none")...), nil
}

// startBroker starts kfakebroker with the 16-partition topic and waits for
// its LISTEN line.
func (b *bench) startBroker(ctx context.Context, path string) (stop func(), err error) {
	cmd := exec.Command(path, "-port", "0", "-partitions", strconv.Itoa(narrowPartitions), "-topics", narrowTopic)
	logf, err := os.Create(filepath.Join(b.tmp, "broker.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kfakebroker: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line := make(chan string, 1)
	go func() { s, _ := bufio.NewReader(out).ReadString('\n'); line <- s }()
	select {
	case s := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(s), "LISTEN ")
		if !ok {
			stop()
			return nil, fmt.Errorf("kfakebroker printed %q, want LISTEN host:port (log in %s)", s, logf.Name())
		}
		b.brokerAddr, b.brokerPid = addr, cmd.Process.Pid
		return stop, nil
	case <-time.After(time.Minute):
		stop()
		return nil, errors.New("kfakebroker did not listen within a minute")
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// load produces n 1 KiB JSON records to topic, record i to partition
// i % partitions, and checks the end offsets.
func (b *bench) load(ctx context.Context, cl *kgo.Client, topic string, partitions int, n int64) error {
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(7, 11))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % int64(partitions)),
			Key: fmt.Appendf(nil, "u-%d", i%10_000), Value: benchdata.Value(rng, int(i), valueSize)}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("producing to %s: %w", topic, firstErr)
	}
	ends, err := b.ends(ctx, topic)
	if err != nil {
		return err
	}
	var sum int64
	for _, e := range ends {
		sum += e
	}
	if sum != n || len(ends) != partitions {
		return fmt.Errorf("%s holds %d records in %d partitions, want %d in %d", topic, sum, len(ends), n, partitions)
	}
	fmt.Fprintf(os.Stderr, "loaded %d records into %s (%d partitions) in %s\n", n, topic, partitions, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// checkSpace makes sure the work directory's filesystem holds every run's
// files, which stay until the end. Deleting a run's files before the next
// run starts made the runs after it slower: ext4 without a journal (this
// project's test machines') does not reuse an inode for at least a minute
// after it was freed (fs/ext4/ialloc.c, recently_deleted), and each new
// file's inode is found by walking past every one freed meanwhile, one
// buffer lookup each. A run then paid for the files of the runs before it,
// in proportion to the files it makes: a share of the measure that grew
// from round to round and weighed most on Spillway, which makes twice the
// naive writer's files and four directories per partition.
func (b *bench) checkSpace(cs []*contender) error {
	if b.deleteOuts {
		return nil
	}
	var need int64
	for _, c := range cs {
		if c.name != "raw" {
			// Values, and a generous envelope; compressed runs take less.
			need += c.records * (valueSize + 256)
		}
	}
	need *= int64(b.rounds)
	var st unix.Statfs_t
	if err := unix.Statfs(b.tmp, &st); err != nil {
		return fmt.Errorf("checking the free space of %s: %w", b.tmp, err)
	}
	if free := int64(st.Bavail) * st.Bsize; free < need+1<<30 {
		return fmt.Errorf("the runs' files, kept until the end, need up to %d MiB and %s has %d MiB free: run fewer -rounds or -workloads, set TMPDIR to a larger filesystem, or give -delete-outputs (which makes later runs slower on ext4 without a journal)", (need+1<<30)>>20, b.tmp, free>>20)
	}
	return nil
}

func (b *bench) ends(ctx context.Context, topic string) (map[int32]int64, error) {
	l, err := b.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

func (b *bench) baseline(workload, name, mode, topic string, records, perFile int64, useZstd bool, extra ...string) *contender {
	return &contender{workload: workload, name: name, topic: topic, records: records,
		start: func(ctx context.Context, group, out string) (*exec.Cmd, error) {
			args := []string{"-mode", mode, "-brokers", b.brokerAddr, "-topic", topic,
				"-group", group, "-dir", out, "-per-file", strconv.FormatInt(perFile, 10),
				"-zstd=" + strconv.FormatBool(useZstd)}
			args = append(append(args, b.fetchArgs...), extra...)
			if mode == "naive" {
				return b.command(ctx, workload+"-"+name, b.baselineBin, args...), nil
			}
			return exec.CommandContext(ctx, b.baselineBin, args...), nil
		}}
}

// baseRun is spillwayRun with the -base build, or nothing without one.
func (b *bench) baseRun(workload, topic string, records, perFile int64, compression string) []*contender {
	if b.baseBin == "" {
		return nil
	}
	c := b.spillwayRunOf(b.baseBin, "spillway@base", workload, topic, records, perFile, compression)
	return []*contender{c}
}

func (b *bench) spillwayRun(workload, topic string, records, perFile int64, compression string) *contender {
	return b.spillwayRunOf(b.spillway, "spillway", workload, topic, records, perFile, compression)
}

func (b *bench) spillwayRunOf(bin, name, workload, topic string, records, perFile int64, compression string) *contender {
	return &contender{workload: workload, name: name, topic: topic, records: records, stop: true,
		start: func(ctx context.Context, group, out string) (*exec.Cmd, error) {
			// The defaults a user gets, but for the file boundaries (by
			// count, so that nothing waits for max_age) and no admin port
			// (the machine is shared). When the budget fills with 1,000
			// files open and nothing uploading, the sink closes the
			// largest files early (relief): the rest of such a partition
			// then waits for max_age, the default 5m of which would
			// outlast the run's patience; 30s shows it as an outlier.
			cfg := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %q
  topics: [%q]
storage:
  url: %q
file:
  max_records: %d
  max_age: 30s
format:
  type: jsonl
  compression: %s
admin:
  listen: ""
`, b.brokerAddr, group, topic, "file://"+out, perFile, compression)
			path := out + ".yaml"
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				return nil, err
			}
			args := []string{"run", "--config", path}
			if b.profile != "" && bin == b.spillway {
				name := filepath.Join(b.profile, fmt.Sprintf("%s-%d", strings.ReplaceAll(workload, " ", "-"), b.seq))
				args = []string{"-config", path, "-cpuprofile", name + ".pprof"}
				if b.traces {
					args = append(args, "-trace", name+".trace")
				}
			}
			cmd := b.command(ctx, workload+"-"+name, bin, args...)
			cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_DISABLED=true")
			return cmd, nil
		}}
}

// command runs path with args, under strace -c -f when -strace asks for
// it. It is a process group of its own, so that SIGTERM reaches the traced
// process as well as strace.
func (b *bench) command(ctx context.Context, name, path string, args ...string) *exec.Cmd {
	if b.strace == "" {
		return exec.CommandContext(ctx, path, args...)
	}
	out := filepath.Join(b.strace, fmt.Sprintf("%s-%d.txt", strings.ReplaceAll(name, " ", "-"), b.seq))
	cmd := exec.CommandContext(ctx, "strace", append([]string{"-f", "-c", "-o", out, "--", path}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// measure runs c once: from its start until its group's commit equals the
// log end. A process still running then (Spillway) is stopped with SIGTERM;
// its CPU time is its user+sys at exit.
func (b *bench) measure(ctx context.Context, c *contender) (result, error) {
	ends, err := b.ends(ctx, c.topic)
	if err != nil {
		return result{}, err
	}
	b.seq++
	group := fmt.Sprintf("bench-%d", b.seq)
	out := filepath.Join(b.tmp, fmt.Sprintf("run-%d", b.seq))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return result{}, err
	}
	// The files stay until the end (the log stays for -keep): see
	// checkSpace.
	if b.deleteOuts {
		defer os.RemoveAll(out)
	} else {
		b.outs = append(b.outs, out)
	}
	cmd, err := c.start(ctx, group, out)
	if err != nil {
		return result{}, err
	}
	logPath := filepath.Join(b.tmp, fmt.Sprintf("run-%d-%s-%s.log", b.seq, strings.ReplaceAll(c.workload, " ", "-"), c.name))
	logf, err := os.Create(logPath)
	if err != nil {
		return result{}, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf

	broker0 := procCPU(b.brokerPid)
	dev := diskOf(out)
	disk0 := readDisk(dev)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	var exitedAt time.Time
	var caughtUp time.Duration
	deadline := time.Now().Add(10 * time.Minute)
	for caughtUp == 0 {
		select {
		case err := <-done:
			exited, exitedAt = true, time.Now()
			if err != nil {
				return result{}, fmt.Errorf("exited before its commit reached the end: %w\n%s", err, tail(logPath))
			}
		case <-time.After(20 * time.Millisecond):
		}
		if b.committed(ctx, group, c.topic, ends) {
			caughtUp = time.Since(start)
			break
		}
		// The coordinator may answer a fetch of offsets with a retriable
		// error while the member leaves: a process that exited is given a
		// few seconds of polls.
		if exited && time.Since(exitedAt) > 5*time.Second {
			return result{}, fmt.Errorf("exited 0 but its commit is short of the end\n%s", tail(logPath))
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return result{}, fmt.Errorf("not caught up within 10 minutes\n%s", tail(logPath))
		}
	}
	if !exited {
		// Spillway runs until told to stop; a baseline exits by itself
		// once it has committed.
		if c.stop && cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		} else if c.stop {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case err := <-done:
			// Under strace, the tracer's own end decides the status.
			if err != nil && b.strace == "" {
				return result{}, fmt.Errorf("stopping: %w\n%s", err, tail(logPath))
			}
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
			return result{}, fmt.Errorf("did not exit within 2 minutes of its commit\n%s", tail(logPath))
		}
	}
	st := cmd.ProcessState
	return result{wall: caughtUp, cpu: st.UserTime() + st.SystemTime(), sys: st.SystemTime(), broker: procCPU(b.brokerPid) - broker0, disk: readDisk(dev).sub(disk0)}, nil
}

// procCPU is the user+sys time of process pid so far, from /proc (the
// broker runs on, so its rusage at exit can't serve), or 0 where there is
// no /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are the 14th and 15th fields of the line.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on Linux everywhere Go runs.
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// committed says whether group's commit equals ends. An error (the group
// may not exist yet) is a no.
func (b *bench) committed(ctx context.Context, group, topic string, ends map[int32]int64) bool {
	r, err := b.adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	for p, e := range ends {
		o, ok := r.Lookup(topic, p)
		if e == 0 {
			continue
		}
		if !ok || o.Err != nil || o.At < e {
			return false
		}
	}
	return true
}

// median is the median of f over rs (the mean of the middle two for an
// even count): a best-of would favour whichever contender's rounds spread
// the most.
func median(rs []result, f func(result) time.Duration) time.Duration {
	v := make([]time.Duration, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// spread is the fastest and slowest of rs.
func spread(rs []result) (lo, hi time.Duration) {
	lo, hi = rs[0].wall, rs[0].wall
	for _, r := range rs[1:] {
		lo, hi = min(lo, r.wall), max(hi, r.wall)
	}
	return lo, hi
}

// pairedWins says in how many rounds c finished before other did in the
// same round, as "k/n": the rounds run every contender in turn, so each
// pair shares the machine's state of the moment.
func pairedWins(c, other *contender) string {
	n := min(len(c.results), len(other.results))
	k := 0
	for i := range n {
		if c.results[i].wall < other.results[i].wall {
			k++
		}
	}
	return fmt.Sprintf("%d/%d", k, n)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func (b *bench) print(cs []*contender) {
	naive := map[string]*contender{}
	for _, c := range cs {
		if strings.HasPrefix(c.name, "naive") {
			naive[c.workload] = c
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("\nuserbench %s, %s, %d CPUs; 16p: %d records, 1000p: %d records, 1 KiB values; medians of %d rounds; baselines fetch as %s\n\n",
		time.Now().Format("2006-01-02 15:04"), host, runtime.NumCPU(), b.records, b.wideRecords, b.rounds, b.fetch)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "workload\tcontender\trecords/s\tseconds\tspread\tvs naive\tfaster in\tCPU-s/M rec\tbroker CPU-s/M rec\t")
	rates := map[string]float64{}
	for _, c := range cs {
		wall := median(c.results, func(r result) time.Duration { return r.wall })
		rate := float64(c.records) / wall.Seconds()
		rates[c.workload+"/"+c.name] = rate
		ratio, wins := "-", "-"
		n := naive[c.workload]
		if c.workload == "16p zstd" && c.name == "raw" {
			n = naive["16p jsonl"]
		}
		if n != nil && n != c {
			ratio = fmt.Sprintf("%.2f", median(n.results, func(r result) time.Duration { return r.wall }).Seconds()/wall.Seconds())
			wins = pairedWins(c, n)
		} else if n == c {
			ratio = "1.00"
		}
		lo, hi := spread(c.results)
		m := float64(c.records) / 1e6
		fmt.Fprintf(w, "%s\t%s\t%.0f\t%.2f\t%.2f–%.2f\t%s\t%s\t%.2f\t%.2f\t\n", c.workload, c.name, rate, wall.Seconds(), lo.Seconds(), hi.Seconds(), ratio, wins,
			median(c.results, func(r result) time.Duration { return r.cpu }).Seconds()/m,
			median(c.results, func(r result) time.Duration { return r.broker }).Seconds()/m)
	}
	_ = w.Flush()
	var baseLines []string
	for _, c := range cs {
		if c.name != "spillway@base" {
			continue
		}
		for _, s := range cs {
			if s.workload == c.workload && s.name == "spillway" {
				baseLines = append(baseLines, fmt.Sprintf("%s: spillway finished before spillway@base in %s rounds", c.workload, pairedWins(s, c)))
			}
		}
	}
	if len(baseLines) > 0 {
		fmt.Printf("\n%s\n", strings.Join(baseLines, "\n"))
	}
	if a, z := rates["1000p jsonl/spillway"], rates["16p jsonl/spillway"]; a > 0 && z > 0 {
		fmt.Printf("\nrecords/s, 1000 vs 16 partitions: spillway %.2f", a/z)
		if ba, bz := rates["1000p jsonl/spillway@base"], rates["16p jsonl/spillway@base"]; ba > 0 && bz > 0 {
			fmt.Printf(", spillway@base %.2f", ba/bz)
		}
		if ra, rz := rates["1000p jsonl/raw"], rates["16p jsonl/raw"]; ra > 0 && rz > 0 {
			fmt.Printf(", raw consumer %.2f", ra/rz)
		}
		fmt.Println()
	}
	fmt.Println("\nseconds: from the process's start until its group's commit equals the log end; the median of the rounds, and their spread.")
	fmt.Println("vs naive: the naive writer's median seconds over the contender's (above 1 is faster); 16p zstd compares with naive-zstd.")
	fmt.Println("faster in: the rounds in which the contender finished before the naive writer of the same round.")
	fmt.Println("CPU: user+sys of the contender's process; broker CPU: the broker process's over the same run (polls of the commit included).")
}

// ------------------------------------------------------------------- data --
