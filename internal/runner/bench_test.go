package runner

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/bench/benchdata"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// Not the figures to quote against a baseline: in this one process the
// broker and the consumers share a warm runtime, which makes the consumer
// path about twice as cheap as with the broker in its own process and so
// flatters Spillway over the fsync-bound naive writer (spillway/naive 1.45 to
// 1.65 here against 1.05 to 1.23 from outside, docs/bench.md). Ratios come
// from internal/bench/userbench.
//
// End-to-end throughput: one kfake broker loaded once with benchRecords 1 KiB
// JSON values over 16 partitions, then drained several ways, each with its
// own consumer group (so each pays the same ~1 s group join):
//
//	raw:      a franz-go group consumer that polls and discards (the broker's upper bound)
//	naive:    the same consumer appending value+'\n' to one buffered file per partition, one fsync each at the end
//	spillway: runner.Run (jsonl, no compression, file://) until every record is written, then a graceful stop
//	jsonl-zstd, jsonl-gzip: spillway again, compressed
//	avro-zstd, parquet-zstd: spillway again, in each format with zstd
//	files-16p, files-1000p: spillway (jsonl, no compression) with files of
//	  benchRecords/1000 records each, over the 16-partition topic and over a
//	  topic of 1,000 partitions loaded with the same records (loaded only
//	  when files-1000p runs), so that both write 1,000 files of the same size
//	raw-1000p: raw over the 1,000-partition topic
//
// Run, without -race:
//
//	SPILLWAY_BENCH_ROUNDS=3 go test -run XXX -bench BenchmarkDrain -benchtime 1x ./internal/runner/
//
// Each sub-benchmark reports records/s, MB/s (value bytes / elapsed) and the
// live-heap peak above the pre-run baseline, and the time to the first
// record (mostly the group join); spillway also reports the budget's peak and
// limit (the data budget, half of memory_limit), the stop's duration and the
// bytes stored. When all three run in one BenchmarkDrain call, the ratios
// spillway/naive and naive/raw (medians over the rounds) are logged by the last
// spillway run, zstd and gzip against spillway by the last jsonl-gzip run,
// each format's records/s against jsonl+zstd by the last parquet-zstd run,
// and files-1000p against files-16p by the last files-1000p run. Speed is
// never asserted. The figures of #12 were taken with
//
//	SPILLWAY_BENCH_RECORDS=1000000 SPILLWAY_BENCH_ROUNDS=3 GOMAXPROCS=2 go test -run XXX -bench 'BenchmarkDrain/(raw|naive|spillway|jsonl-(zstd|gzip)$|files|raw-1000p)' -benchtime 1x ./internal/runner/

const (
	benchRecordsDefault = 200_000 // ~200 MB of values
	benchPartitions     = 16
	benchWidePartitions = 1000
	benchValueSize      = 1024
)

// benchRounds is SPILLWAY_BENCH_ROUNDS, or 1.
func benchRounds(b *testing.B) int {
	s := os.Getenv("SPILLWAY_BENCH_ROUNDS")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("SPILLWAY_BENCH_ROUNDS=%q: want a positive integer", s)
	}
	return n
}

// benchRecords is the number of records to load; SPILLWAY_BENCH_RECORDS
// lowers (or raises) it.
func benchRecords(b *testing.B) int {
	s := os.Getenv("SPILLWAY_BENCH_RECORDS")
	if s == "" {
		return benchRecordsDefault
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("SPILLWAY_BENCH_RECORDS=%q: want a positive integer", s)
	}
	return n
}

// benchCPU is the user and system CPU time of this process so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchHeap samples the live heap every 2 ms and returns the peak above the
// baseline taken (after a GC) when it started.
type benchHeap struct {
	base    uint64
	sampler *heapSampler
}

func startBenchHeap() *benchHeap {
	runtime.GC()
	base := heapNow()
	return &benchHeap{base: base, sampler: sampleHeap(2 * time.Millisecond)}
}

// peakDelta stops sampling and returns the peak minus the baseline.
func (h *benchHeap) peakDelta() uint64 {
	p := h.sampler.Stop()
	if p < h.base {
		return 0
	}
	return p - h.base
}

type benchData struct {
	cluster    *testkit.Cluster
	admin      *kgo.Client
	end        map[int32]int64
	records    int64
	valueBytes int64
}

// benchDrain runs one consumer group over the whole topic, calling each for
// every fetch, until every partition reached its end offset. It returns how
// long the first records took (mostly the group join).
func benchDrain(b *testing.B, d *benchData, group string, each func(kgo.FetchTopicPartition)) (first time.Duration) {
	return benchDrainTopic(b, d, "events", d.end, group, each)
}

// benchDrainTopic is benchDrain over topic, whose end offsets are end.
func benchDrainTopic(b *testing.B, d *benchData, topic string, end map[int32]int64, group string, each func(kgo.FetchTopicPartition)) (first time.Duration) {
	start := time.Now()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(d.cluster.Addrs()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	left := len(end)
	for _, e := range end {
		if e == 0 {
			left--
		}
	}
	next := make(map[int32]int64, len(end))
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatalf("drain %s: %v (reached %v of %v)", group, err, next, end)
		}
		fs.EachError(func(t string, p int32, err error) { b.Fatalf("fetch %s/%d: %v", t, p, err) })
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			if first == 0 {
				first = time.Since(start)
			}
			each(p)
			before := next[p.Partition]
			next[p.Partition] = p.Records[len(p.Records)-1].Offset + 1
			if e := end[p.Partition]; before < e && next[p.Partition] >= e {
				left--
			}
		})
	}
	return first
}

// BenchmarkDrain compares raw, naive and spillway drains of the same data on
// the same broker.
func BenchmarkDrain(b *testing.B) {
	n := benchRecords(b)
	d := &benchData{cluster: testkit.NewCluster(b, benchPartitions, "events")}
	d.admin = d.cluster.Client(b)
	rng := rand.New(rand.NewPCG(7, 11))
	testkit.Produce(b, d.admin, "events", n, func(i int) *kgo.Record {
		v := benchdata.Value(rng, i, benchValueSize)
		d.valueBytes += int64(len(v))
		return &kgo.Record{Partition: int32(i % benchPartitions), Key: fmt.Appendf(nil, "u-%d", i%10_000), Value: v}
	})
	d.end = testkit.EndOffsets(b, d.admin, "events")
	for _, e := range d.end {
		d.records += e
	}
	if d.records != int64(n) {
		b.Fatalf("loaded %d records, want %d", d.records, n)
	}

	// records/s of every run of each sub-benchmark in this call (-count
	// runs each sub-benchmark that many times, in turn).
	rates := map[string][]float64{}
	median := func(name string) float64 {
		v := slices.Sorted(slices.Values(rates[name]))
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	cpuRates := map[string][]float64{}
	cmedian := func(name string) float64 {
		v := slices.Sorted(slices.Values(cpuRates[name]))
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	var seq atomic.Int64
	var spillwayOn func(b *testing.B, name, topic, typ, compression string, maxRecords int64)
	report := func(b *testing.B, name string, heap uint64, first, cpu time.Duration) {
		// CPU time of the whole process (the in-process broker included):
		// on a shared machine it says what a run cost where wall time
		// says how long it waited for a core.
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s")
		b.ReportMetric(float64(d.records)*float64(b.N)/cpu.Seconds(), "records/cpu-s")
		cpuRates[name] = append(cpuRates[name], float64(d.records)*float64(b.N)/cpu.Seconds())
		sec := b.Elapsed().Seconds()
		rate := float64(d.records) * float64(b.N) / sec
		b.ReportMetric(rate, "records/s")
		b.ReportMetric(float64(d.valueBytes)*float64(b.N)/sec/1e6, "value-MB/s")
		b.ReportMetric(float64(heap)/(1<<20), "heap-peak-MiB")
		b.ReportMetric(float64(first.Milliseconds()), "first-rec-ms")
		rates[name] = append(rates[name], rate)
	}
	group := func(name string) string { return fmt.Sprintf("bench-%s-%d", name, seq.Add(1)) }

	// The sub-benchmarks run in rounds (SPILLWAY_BENCH_ROUNDS, default 1),
	// every one of them in each round, so that the machine's drift over
	// the minutes falls on all alike and the ratios of medians compare
	// like with like (-count repeats each before the next starts).
	type sub struct {
		name string
		fn   func(*testing.B)
	}
	var subs []sub
	run := func(name string, fn func(*testing.B)) { subs = append(subs, sub{name, fn}) }

	run("raw", func(b *testing.B) {
		b.SetBytes(d.valueBytes)
		var heap uint64
		var first, cpu time.Duration
		for range b.N {
			b.StopTimer()
			h := startBenchHeap()
			b.StartTimer()
			c0 := benchCPU()
			first = benchDrain(b, d, group("raw"), func(kgo.FetchTopicPartition) {})
			cpu += benchCPU() - c0
			b.StopTimer()
			heap = max(heap, h.peakDelta())
		}
		report(b, "raw", heap, first, cpu)
	})

	run("naive", func(b *testing.B) {
		b.SetBytes(d.valueBytes)
		var heap uint64
		var first, cpu time.Duration
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			h := startBenchHeap()
			b.StartTimer()
			c0 := benchCPU()
			files := map[int32]*os.File{}
			bufs := map[int32]*bufio.Writer{}
			first = benchDrain(b, d, group("naive"), func(p kgo.FetchTopicPartition) {
				w := bufs[p.Partition]
				if w == nil {
					f, err := os.Create(filepath.Join(dir, fmt.Sprintf("events-%d.jsonl", p.Partition)))
					if err != nil {
						b.Fatal(err)
					}
					files[p.Partition], w = f, bufio.NewWriterSize(f, 1<<20)
					bufs[p.Partition] = w
				}
				for _, r := range p.Records {
					w.Write(r.Value)
					w.WriteByte('\n')
				}
			})
			for p, f := range files {
				if err := bufs[p].Flush(); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
			cpu += benchCPU() - c0
			b.StopTimer()
			heap = max(heap, h.peakDelta())
		}
		report(b, "naive", heap, first, cpu)
	})

	// spillway drains the topic with runner.Run writing typ files
	// compressed with compression, and reports as the others do, under name.
	spillway := func(b *testing.B, name, typ, compression string) {
		spillwayOn(b, name, "events", typ, compression, 0)
	}
	var wideLoaded bool
	// loadWide loads the 1,000-partition topic with the same values, in the
	// same order, as events.
	loadWide := func(b *testing.B) {
		if wideLoaded {
			return
		}
		wideLoaded = true
		if _, err := kadm.NewClient(d.admin).CreateTopic(context.Background(), benchWidePartitions, 1, nil, "wide"); err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 11))
		testkit.Produce(b, d.admin, "wide", n, func(i int) *kgo.Record {
			return &kgo.Record{Partition: int32(i % benchWidePartitions), Key: fmt.Appendf(nil, "u-%d", i%10_000), Value: benchdata.Value(rng, i, benchValueSize)}
		})
		if got := testkit.EndOffsets(b, d.admin, "wide"); len(got) != benchWidePartitions {
			b.Fatalf("wide has %d partitions", len(got))
		}
	}
	spillwayOn = func(b *testing.B, name, topic, typ, compression string, maxRecords int64) {
		b.SetBytes(d.valueBytes)
		var heap uint64
		var first, cpu time.Duration
		var budgetPeak, budgetLimit, outBytes int64
		var stopTook time.Duration
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			cfg := testConfig(d.cluster.Addrs(), dir)
			cfg.Kafka.Group = group(name)
			cfg.Kafka.Topics = []string{topic}
			cfg.Backpressure.MemoryLimit = "512MiB"
			cfg.File.MaxBytes = 128 * config.MiB
			cfg.File.MaxRecords = maxRecords
			cfg.File.MaxAge = time.Hour
			cfg.Format.Type = typ
			cfg.Format.Compression = compression
			cfg.Shutdown.Timeout = 2 * time.Minute
			if strings.HasSuffix(name, "-spool") {
				// Open files staged on disk, encoded when they close.
				cfg.Backpressure.SpoolDir = b.TempDir()
				cfg.Backpressure.DiskLimit = "4GiB"
			}
			if err := cfg.Validate(); err != nil {
				b.Fatalf("bench config: %v", err)
			}
			var prog atomic.Pointer[Progress]
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			h := startBenchHeap()
			b.StartTimer()
			c0 := benchCPU()

			start := time.Now()
			first = 0
			go func() { done <- Run(ctx, cfg, testLogger(b), Options{OnStart: prog.Store}) }()
			// With max_bytes 128MiB and max_age 1h no file closes before the
			// stop, so nothing is committed until then: wait until every
			// record is written, then stop gracefully (finish, fsync, commit).
			deadline := time.Now().Add(5 * time.Minute)
			for {
				if p := prog.Load(); p != nil {
					written := p.Sink().Records
					if first == 0 && written > 0 {
						first = time.Since(start)
					}
					if written >= d.records {
						break
					}
				}
				select {
				case err := <-done:
					cancel()
					b.Fatalf("spillway stopped early: %v", err)
				default:
				}
				if time.Now().After(deadline) {
					cancel()
					<-done
					b.Fatalf("spillway did not write %d records within 5 minutes", d.records)
				}
				time.Sleep(2 * time.Millisecond)
			}
			stopAt := time.Now()
			cancel()
			err := <-done
			stopTook = time.Since(stopAt)
			cpu += benchCPU() - c0

			b.StopTimer()
			heap = max(heap, h.peakDelta())
			if err != nil {
				b.Fatalf("graceful stop: %v", err)
			}
			bs := prog.Load().Budget()
			budgetPeak, budgetLimit = max(budgetPeak, bs.Peak), bs.Limit
			outBytes = prog.Load().Sink().BytesUploaded
			if got, want := testkit.CommittedOffsets(b, d.admin, cfg.Kafka.Group, topic), testkit.EndOffsets(b, d.admin, topic); !maps.Equal(got, want) {
				b.Fatalf("after stop, committed %v, want end offsets %v", got, want)
			}
		}
		report(b, name, heap, first, cpu)
		b.ReportMetric(float64(budgetPeak)/(1<<20), "budget-peak-MiB")
		b.ReportMetric(float64(budgetLimit)/(1<<20), "budget-limit-MiB")
		b.ReportMetric(float64(stopTook.Milliseconds()), "stop-ms")
		b.ReportMetric(float64(outBytes)/1e6, "out-MB")
	}

	run("spillway", func(b *testing.B) {
		spillway(b, "spillway", "jsonl", "none")
		// Logged here, not in the parent: a parent's log shows only with -v.
		if raw, naive, sw := median("raw"), median("naive"), median("spillway"); raw > 0 && naive > 0 {
			b.Logf("%d records, %.0f MB, medians of %d/%d/%d runs: spillway/naive = %.2f, naive/raw = %.2f, spillway/raw = %.2f",
				d.records, float64(d.valueBytes)/1e6, len(rates["raw"]), len(rates["naive"]), len(rates["spillway"]),
				sw/naive, naive/raw, sw/raw)
			b.Logf("records per CPU-second of the process: raw %.0f, naive %.0f, spillway %.0f: spillway/naive = %.2f",
				cmedian("raw"), cmedian("naive"), cmedian("spillway"), cmedian("spillway")/cmedian("naive"))
		}
	})

	// The formats, all with zstd, on the same data: records/s relative to
	// jsonl+zstd, logged by the last.
	run("jsonl-zstd", func(b *testing.B) { spillway(b, "jsonl-zstd", "jsonl", "zstd") })
	run("jsonl-gzip", func(b *testing.B) {
		spillway(b, "jsonl-gzip", "jsonl", "gzip")
		if base := median("spillway"); base > 0 {
			b.Logf("medians, records/s: jsonl %.0f; jsonl+zstd %.0f (%.2f of jsonl); jsonl+gzip %.0f (%.2f)",
				base, median("jsonl-zstd"), median("jsonl-zstd")/base, median("jsonl-gzip"), median("jsonl-gzip")/base)
			cb := cmedian("spillway")
			b.Logf("records per CPU-second: jsonl %.0f; jsonl+zstd %.0f (%.2f); jsonl+gzip %.0f (%.2f)",
				cb, cmedian("jsonl-zstd"), cmedian("jsonl-zstd")/cb, cmedian("jsonl-gzip"), cmedian("jsonl-gzip")/cb)
		}
	})
	run("avro-zstd", func(b *testing.B) { spillway(b, "avro-zstd", "avro", "zstd") })
	run("parquet-zstd", func(b *testing.B) {
		spillway(b, "parquet-zstd", "parquet", "zstd")
		if base := median("jsonl-zstd"); base > 0 {
			b.Logf("medians of %d runs, records/s: jsonl+zstd %.0f; avro+zstd %.0f (%.2f of jsonl+zstd); parquet+zstd %.0f (%.2f)",
				len(rates["jsonl-zstd"]), base, median("avro-zstd"), median("avro-zstd")/base, median("parquet-zstd"), median("parquet-zstd")/base)
		}
	})

	// The same drains with the spool on (backpressure.spool_dir): records
	// go to disk and back before they are encoded, at the close.
	run("jsonl-zstd-spool", func(b *testing.B) { spillway(b, "jsonl-zstd-spool", "jsonl", "zstd") })
	run("parquet-zstd-spool", func(b *testing.B) {
		spillway(b, "parquet-zstd-spool", "parquet", "zstd")
		if base, pbase := median("jsonl-zstd"), median("parquet-zstd"); base > 0 && pbase > 0 {
			b.Logf("medians, records/s: jsonl+zstd %.0f, with the spool %.0f (%.2f); parquet+zstd %.0f, with the spool %.0f (%.2f)",
				base, median("jsonl-zstd-spool"), median("jsonl-zstd-spool")/base, pbase, median("parquet-zstd-spool"), median("parquet-zstd-spool")/pbase)
			b.Logf("records per CPU-second: jsonl+zstd %.0f, with the spool %.0f (%.2f); parquet+zstd %.0f, with the spool %.0f (%.2f)",
				cmedian("jsonl-zstd"), cmedian("jsonl-zstd-spool"), cmedian("jsonl-zstd-spool")/cmedian("jsonl-zstd"),
				cmedian("parquet-zstd"), cmedian("parquet-zstd-spool"), cmedian("parquet-zstd-spool")/cmedian("parquet-zstd"))
		}
	})

	// Files of the same record count over 16 and over 1,000 partitions.
	perFile := max(int64(n)/benchWidePartitions, 1)
	// raw-1000p is raw over the 1,000-partition topic: what the broker and
	// the Kafka client allow there.
	run("raw-1000p", func(b *testing.B) {
		b.StopTimer()
		loadWide(b)
		wideEnd := testkit.EndOffsets(b, d.admin, "wide")
		b.StartTimer()
		b.SetBytes(d.valueBytes)
		var heap uint64
		var first, cpu time.Duration
		for range b.N {
			b.StopTimer()
			h := startBenchHeap()
			b.StartTimer()
			c0 := benchCPU()
			first = benchDrainTopic(b, d, "wide", wideEnd, group("raw-1000p"), func(kgo.FetchTopicPartition) {})
			cpu += benchCPU() - c0
			b.StopTimer()
			heap = max(heap, h.peakDelta())
		}
		report(b, "raw-1000p", heap, first, cpu)
	})
	run("files-16p", func(b *testing.B) { spillwayOn(b, "files-16p", "events", "jsonl", "none", perFile) })
	run("files-1000p", func(b *testing.B) {
		b.StopTimer()
		loadWide(b)
		b.StartTimer()
		spillwayOn(b, "files-1000p", "wide", "jsonl", "none", perFile)
		if base := median("files-16p"); base > 0 {
			b.Logf("medians, records/s, files of %d records: 16 partitions %.0f; 1,000 partitions %.0f (%.2f of 16)",
				perFile, base, median("files-1000p"), median("files-1000p")/base)
			b.Logf("records per CPU-second: 16 partitions %.0f; 1,000 partitions %.0f (%.2f)",
				cmedian("files-16p"), cmedian("files-1000p"), cmedian("files-1000p")/cmedian("files-16p"))
			if raw := median("raw-1000p"); raw > 0 {
				b.Logf("raw consumer, records/s: 16 partitions %.0f, 1,000 partitions %.0f (%.2f); files-1000p/raw-1000p = %.2f",
					median("raw"), raw, raw/median("raw"), median("files-1000p")/raw)
			}
		}
	})
	for range benchRounds(b) {
		for _, r := range subs {
			b.Run(r.name, r.fn)
		}
	}
}
