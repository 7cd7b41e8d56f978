// Package testkit holds Spillway's test helpers: an in-process Kafka cluster
// (franz-go's kfake), fast producers, offset look-ups, a kcat wrapper that
// produces records with a client Spillway did not write, and readers that
// check what Spillway stored (exactly once, per partition).
//
// It is imported only from _test.go files, never from the binary.
//
// Every helper takes a testing.TB, fails the test on error (so callers need no
// error handling), and registers its cleanup with t.Cleanup, so that clusters,
// clients and goroutines are gone when the test ends (the tests run under
// goleak).
package testkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// OpTimeout bounds every single broker operation a helper does (listing
// offsets, producing a batch). kfake answers in milliseconds; this only stops a
// broken test from hanging until the go test timeout.
const OpTimeout = 2 * time.Minute

// Cluster is an in-process Kafka cluster (kfake) with one broker, closed when
// the test ends.
type Cluster struct {
	fake *kfake.Cluster
	// topics counts the topics Topic created, to name each apart.
	topics atomic.Int64
}

// NewCluster starts a one-broker kfake cluster with the given topics, each
// with the given number of partitions. It is closed at the test's cleanup.
func NewCluster(t testing.TB, partitions int, topics ...string) *Cluster {
	t.Helper()
	if partitions <= 0 {
		t.Fatalf("testkit.NewCluster: partitions must be > 0, got %d", partitions)
	}
	fake, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), topics...),
	)
	if err != nil {
		t.Fatalf("testkit.NewCluster: starting kfake: %v", err)
	}
	t.Cleanup(fake.Close)
	return &Cluster{fake: fake}
}

// Addrs returns the cluster's seed broker addresses (host:port).
func (c *Cluster) Addrs() []string { return c.fake.ListenAddrs() }

// Fake returns the underlying kfake cluster, for fault injection (Control,
// MoveTopicPartition, AddNode, ...).
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// Client returns a producer/admin client for the cluster, closed at the test's
// cleanup. It uses kgo.ManualPartitioner, so a produced record goes to the
// partition set in its Partition field (see Produce). opts are applied after
// the defaults and may override them.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(c.Addrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("testkit: new kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Produce produces n records to topic and returns once all are acknowledged,
// failing the test on the first error. gen(i) builds record i (0 <= i < n);
// its Topic is set to topic.
//
// The partition of each record is the one gen puts in r.Partition, which holds
// only if cl uses kgo.RecordPartitioner(kgo.ManualPartitioner()), as clients
// from Cluster.Client do. With another partitioner, r.Partition is ignored.
//
// Records are produced asynchronously and the client's buffer limit
// (kgo.MaxBufferedRecords) bounds how many are in flight, so this is fast for
// millions of records. Records within one partition keep gen's order.
func Produce(t testing.TB, cl *kgo.Client, topic string, n int, gen func(i int) *kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*OpTimeout)
	defer cancel()

	var (
		wg       sync.WaitGroup
		failed   atomic.Bool
		errOnce  sync.Once
		firstErr error
	)
	promise := func(r *kgo.Record, err error) {
		defer wg.Done()
		if err != nil {
			errOnce.Do(func() {
				firstErr = fmt.Errorf("record partition %d: %w", r.Partition, err)
				failed.Store(true)
			})
		}
	}
	produced := 0
	for i := 0; i < n && !failed.Load(); i++ {
		r := gen(i)
		if r == nil {
			t.Fatalf("testkit.Produce: gen(%d) returned nil", i)
		}
		r.Topic = topic
		wg.Add(1)
		cl.Produce(ctx, r, promise)
		produced++
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("testkit.Produce: %d of %d records to %q issued, first error: %v", produced, n, topic, firstErr)
	}
}

// EndOffsets returns the end offset (high watermark) of each partition of
// topic: with records produced from offset 0, the count of records in each.
func EndOffsets(t testing.TB, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("testkit.EndOffsets(%q): %v", topic, err)
	}
	out := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			out[o.Partition] = o.Offset
		}
	})
	if len(out) == 0 {
		t.Fatalf("testkit.EndOffsets(%q): topic not found", topic)
	}
	return out
}

// CommittedOffsets returns the offsets that group has committed for topic's
// partitions. Partitions without a committed offset are left out, so a group
// that committed nothing (or does not exist) gives an empty map.
func CommittedOffsets(t testing.TB, cl *kgo.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	resps, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, group, topic)
	if err == nil {
		err = resps.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{} // kfake's answer for a group that never committed
	}
	if err != nil {
		t.Fatalf("testkit.CommittedOffsets(group %q, topic %q): %v", group, topic, err)
	}
	out := make(map[int32]int64)
	resps.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// StartCluster starts a one-broker kfake cluster with no topics, for a
// package's TestMain to share among its tests: each creates topics of its
// own with Topic, so that tests sharing it never see each other's records
// or groups. The caller closes it (Fake().Close) after the tests.
func StartCluster() (*Cluster, error) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("testkit.StartCluster: starting kfake: %w", err)
	}
	return &Cluster{fake: fake}, nil
}

// Topic creates a topic with the given number of partitions, named after
// the test (and a count, for a test that needs several), and returns its
// name: with a cluster that StartCluster shares, a test's topic is its own.
// Use the name as the test's group too.
func (c *Cluster) Topic(t testing.TB, partitions int) string {
	t.Helper()
	name := topicName(t.Name(), c.topics.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	cl := c.Client(t)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("testkit: create topic %q: %v", name, err)
	}
	return name
}

// topicName is a test's name as a valid topic name, made unique by n.
func topicName(test string, n int64) string {
	b := []byte(test)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return fmt.Sprintf("%s.%d", b, n)
}

// Poll polls cl until it has n records, failing t on a fetch error or
// after a minute without them.
func Poll(t testing.TB, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("polled %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out[:n]
}
