// Command backlog is a test-only producer for internal/e2e: it fills a topic
// with a large backlog of realistic records, as fast as a franz-go producer
// can, and prints one summary line on stdout:
//
//	PRODUCED records=N bytes=B
//
// where B is the sum of the values' lengths. It exits non-zero on the first
// produce error.
//
// It is a separate program, built without -race, because the e2e tests run
// under -race, and the race detector slows zstd compression and record
// encoding in the test process about tenfold (measured: 3.7 MiB/s against
// 39 MiB/s), which would turn producing 1.5 GiB into ten minutes.
//
// Records are deterministic. Record i (from 0) goes to partition
// i % partitions, so it lands at offset i / partitions. Its key is "big-<i>".
// Its value size is drawn from a seeded distribution: 70% from 100 B to
// 4 KiB, 25% from 4 KiB to 64 KiB, 5% from 256 KiB to 1 MiB. The first half
// of the value is random bytes (they don't compress); the rest repeats the
// text
//
//	record <i> of partition <i % partitions>: the quick brown fox jumps over the lazy dog.
//
// followed by one space, which compresses well, so the whole compresses as a
// mix of binary and text would. The e2e tests check stored values against
// that text: keep the two in step.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated seed brokers")
	topic := flag.String("topic", "", "topic to produce to")
	partitions := flag.Int("partitions", 0, "partitions of the topic; record i goes to i % partitions")
	total := flag.Int64("bytes", 0, "produce records until their values add up to at least this many bytes")
	flag.Parse()
	if *brokers == "" || *topic == "" || *partitions <= 0 || *total <= 0 {
		fmt.Fprintln(os.Stderr, "backlog: -brokers, -topic, -partitions and -bytes are required")
		os.Exit(2)
	}
	records, bytes, err := produce(strings.Split(*brokers, ","), *topic, *partitions, *total)
	if err != nil {
		fmt.Fprintf(os.Stderr, "backlog: %v (after %d records)\n", err, records)
		os.Exit(1)
	}
	fmt.Printf("PRODUCED records=%d bytes=%d\n", records, bytes)
}

func produce(brokers []string, topic string, partitions int, total int64) (records, bytes int64, err error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		// A batch must hold a 1 MiB record plus key and framing. The broker's
		// limit (1 MiB + 12 B by default) applies to the compressed batch,
		// which the random half of every value keeps near half that.
		kgo.ProducerBatchMaxBytes(1<<20+64<<10),
		// Keeps the producer's own memory modest.
		kgo.MaxBufferedBytes(64<<20),
	)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	sizes := rand.New(rand.NewPCG(1, 2))
	random := rand.NewChaCha8([32]byte{'s', 'p', 'i', 'l', 'l', 'w', 'a', 'y'})
	for i := 0; bytes < total; i++ {
		if ctx.Err() != nil {
			break
		}
		n := valueSize(sizes)
		v := make([]byte, n)
		_, _ = random.Read(v[:n/2])
		phrase := fmt.Sprintf("record %d of partition %d: the quick brown fox jumps over the lazy dog. ", i, i%partitions)
		for off := n / 2; off < n; {
			off += copy(v[off:], phrase)
		}
		r := &kgo.Record{Partition: int32(i % partitions), Key: fmt.Appendf(nil, "big-%d", i), Value: v}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errOnce.Do(func() {
					firstErr = fmt.Errorf("partition %d: %w", r.Partition, err)
					cancel()
				})
			}
		})
		records++
		bytes += int64(n)
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return records, bytes, firstErr
}

// valueSize draws a value size: 70% from 100 B to 4 KiB, 25% from 4 KiB to
// 64 KiB, 5% from 256 KiB to 1 MiB.
func valueSize(rng *rand.Rand) int {
	switch r := rng.Float64(); {
	case r < 0.70:
		return 100 + rng.IntN(4<<10-100+1)
	case r < 0.95:
		return 4<<10 + rng.IntN(64<<10-4<<10+1)
	default:
		return 256<<10 + rng.IntN(1<<20-256<<10+1)
	}
}
