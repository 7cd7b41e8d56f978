package runner

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/bench/benchdata"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// BenchmarkIcebergDrain drains the same records, on the same broker, in the
// same run, into plain Parquet files ("parquet") and into an Apache Iceberg
// table of the embedded SQL catalog ("table"), with the same file settings
// (Parquet with zstd, file.max_records 2000: about 100 files), and
// commit_interval at its default (1m) as a user would leave it. A drain
// takes seconds here, so the table gets one snapshot of all the files at
// the graceful stop, whose time counts: the commit weighs more than in a
// run of minutes, which commits once a minute. The rounds alternate the two
// (SPILLWAY_BENCH_ROUNDS, default 1), and the last table run logs the
// ratio of the medians: what a table costs over files.
//
//	SPILLWAY_BENCH_ROUNDS=3 go test -run XXX -bench BenchmarkIcebergDrain -benchtime 1x ./internal/runner/
//
// The records are BenchmarkDrain's (SPILLWAY_BENCH_RECORDS, default
// 200,000 values of 1 KiB over 16 partitions).
func BenchmarkIcebergDrain(b *testing.B) {
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

	rates := map[string][]float64{}
	cpus := map[string][]float64{}
	median := func(v []float64) float64 {
		v = slices.Sorted(slices.Values(v))
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	var seq atomic.Int64
	drain := func(b *testing.B, name string, table bool) {
		b.SetBytes(d.valueBytes)
		var cpu time.Duration
		var stopTook time.Duration
		var metaFiles int
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			cfg := testConfig(d.cluster.Addrs(), dir)
			cfg.Kafka.Group = fmt.Sprintf("bench-ice-%s-%d", name, seq.Add(1))
			cfg.Backpressure.MemoryLimit = "512MiB"
			cfg.File.MaxBytes = config.MiB
			cfg.File.MaxRecords = 2000
			cfg.File.MaxAge = 10 * time.Second
			cfg.Format.Type = "parquet"
			cfg.Format.Compression = "zstd"
			cfg.Shutdown.Timeout = 2 * time.Minute
			if table {
				cfg.Iceberg.Table = "kafka.{{topic}}"
				cfg.ApplyIcebergLayout() // as Load does
			}
			if err := cfg.Validate(); err != nil {
				b.Fatalf("bench config: %v", err)
			}
			var prog atomic.Pointer[Progress]
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			b.StartTimer()
			c0 := benchCPU()
			go func() { done <- Run(ctx, cfg, testLogger(b), Options{OnStart: prog.Store}) }()
			deadline := time.Now().Add(5 * time.Minute)
			for {
				if p := prog.Load(); p != nil && p.Sink().Records >= d.records {
					break
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
			if err != nil {
				b.Fatalf("graceful stop: %v", err)
			}
			if got, want := testkit.CommittedOffsets(b, d.admin, cfg.Kafka.Group, "events"), d.end; !maps.Equal(got, want) {
				b.Fatalf("after stop, committed %v, want end offsets %v", got, want)
			}
			// The table's metadata files: its creation, the schema's
			// adoption and one per snapshot.
			metas, _ := filepath.Glob(filepath.Join(dir, "kafka.db", "events", "metadata", "*.metadata.json"))
			metaFiles = len(metas)
		}
		sec := b.Elapsed().Seconds()
		rate := float64(d.records) * float64(b.N) / sec
		rates[name] = append(rates[name], rate)
		cpus[name] = append(cpus[name], float64(d.records)*float64(b.N)/cpu.Seconds())
		b.ReportMetric(rate, "records/s")
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s")
		b.ReportMetric(float64(stopTook.Milliseconds()), "stop-ms")
		if table {
			b.ReportMetric(float64(metaFiles), "metadata-files")
		}
		if table {
			p, tb := median(rates["parquet"]), median(rates["table"])
			pc, tc := median(cpus["parquet"]), median(cpus["table"])
			if p > 0 {
				b.Logf("%d records, medians of %d/%d runs: records/s parquet %.0f, table %.0f: table/parquet = %.3f (the table costs %+.1f%%); per CPU-second parquet %.0f, table %.0f (%+.1f%%)",
					d.records, len(rates["parquet"]), len(rates["table"]), p, tb, tb/p, 100*(p/tb-1), pc, tc, 100*(pc/tc-1))
			}
		}
	}
	for range benchRounds(b) {
		b.Run("parquet", func(b *testing.B) { drain(b, "parquet", false) })
		b.Run("table", func(b *testing.B) { drain(b, "table", true) })
	}
}
