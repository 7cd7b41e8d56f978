package restore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// BenchmarkRestoreVsProducer compares, against one in-process kfake
// broker in the same run, the rate of a restore of stored jsonl (base64;
// no compression, gzip, zstd) with the rate of a raw franz-go producer (idempotent, default
// options) producing the same records. Each iteration restores into a new
// topic and produces into another. It reports both in MB/s of keys and
// values, and restore/raw as the ratio.
//
//	go test -run '^$' -bench RestoreVsProducer -benchtime 3x ./internal/restore/
func BenchmarkRestoreVsProducer(b *testing.B) {
	for _, c := range []string{"none", "gzip", "zstd"} {
		b.Run("jsonl-"+c, func(b *testing.B) { benchRestore(b, c) })
	}
}

func benchRestore(b *testing.B, compression string) {
	// 100,000 records of 1 KiB: with 20,000, a restore's fixed start (two
	// clients, metadata, the producer id, the ledger) weighed on the ratio.
	const partitions, perPartition = 2, 50_000
	gen := func(i int) *kgo.Record {
		v := make([]byte, 1024)
		for j := range v {
			v[j] = byte(i + j)
		}
		return &kgo.Record{Partition: int32(i % partitions), Key: fmt.Appendf(nil, "key-%d", i), Value: v, Timestamp: time.UnixMilli(1e12 + int64(i))}
	}
	cluster := testkit.NewCluster(b, 1)
	cl := cluster.Client(b)
	f := &sourceFixture{cluster: cluster, cl: cl, topic: "bench-src"}
	createTopic(b, cl, f.topic, partitions)
	testkit.Produce(b, cl, f.topic, partitions*perPartition, gen)
	cfg := config.Default()
	cfg.Kafka.Brokers = cluster.Addrs()
	cfg.Kafka.Group = "bench-sink"
	cfg.Kafka.Topics = []string{f.topic}
	cfg.Storage.URL = "file://" + b.TempDir()
	cfg.File.MaxRecords = 2500
	cfg.File.MaxAge = time.Hour
	cfg.Format.Type, cfg.Format.Compression, cfg.Format.ValueEncoding = "jsonl", compression, "base64"
	cfg.Format.Fields = []string{"key", "value", "offset", "timestamp", "headers"}
	cfg.Backpressure.MemoryLimit = "256MiB"
	cfg.Admin.Listen = ""
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	f.cfg = cfg
	drain(b, cfg, cl, f.topic)
	var bytes int64
	for i := range partitions * perPartition {
		r := gen(i)
		bytes += int64(len(r.Key) + len(r.Value))
	}

	// The raw producer's records are built before the clock starts: it
	// pays for producing only.
	pre := make([]*kgo.Record, partitions*perPartition)
	for j := range pre {
		pre[j] = gen(j)
	}
	var raw, rest time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rawTopic, dst := fmt.Sprintf("bench-raw-%d", i), fmt.Sprintf("bench-dst-%d", i)
		createTopic(b, cl, rawTopic, partitions)
		createTopic(b, cl, dst, partitions)

		pcl := cluster.Client(b)
		start := time.Now()
		var wg sync.WaitGroup
		for _, g := range pre {
			r := &kgo.Record{Topic: rawTopic, Partition: g.Partition, Key: g.Key, Value: g.Value, Timestamp: g.Timestamp}
			wg.Add(1)
			pcl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		raw += time.Since(start)
		pcl.Close()

		start = time.Now()
		res, err := f.restoreTo(b, dst, Options{})
		rest += time.Since(start)
		if err != nil || res.Records != partitions*perPartition {
			b.Fatalf("restore: %d records, %v", res.Records, err)
		}
	}
	b.StopTimer()
	mb := float64(bytes) * float64(b.N) / 1e6
	b.ReportMetric(mb/raw.Seconds(), "raw-MB/s")
	b.ReportMetric(mb/rest.Seconds(), "restore-MB/s")
	b.ReportMetric(raw.Seconds()/rest.Seconds(), "restore/raw")
}
