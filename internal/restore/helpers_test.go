package restore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
)

const waitDeadline = 3 * time.Minute

// sourceFixture is a source topic of n records in each of its partitions,
// drained by the real pipeline with the config cfgFn shapes.
type sourceFixture struct {
	cluster *testkit.Cluster
	cl      *kgo.Client
	cfg     *config.Config
	topic   string
	want    map[int32][]*kgo.Record // what the source holds, per partition, in order
}

func newSource(t *testing.T, cluster *testkit.Cluster, topic string, partitions int32, n int, cfgFn func(*config.Config)) *sourceFixture {
	t.Helper()
	cl := cluster.Client(t)
	createTopic(t, cl, topic, partitions)
	f := &sourceFixture{cluster: cluster, cl: cl, topic: topic, want: map[int32][]*kgo.Record{}}
	testkit.Produce(t, cl, topic, n*int(partitions), func(i int) *kgo.Record {
		p := int32(i) % partitions
		r := testkit.HostileRecord(i, p)
		f.want[p] = append(f.want[p], testkit.HostileRecord(i, p))
		return r
	})
	cfg := config.Default()
	cfg.Kafka.Brokers = cluster.Addrs()
	cfg.Kafka.Group = "sink-" + topic
	cfg.Kafka.Topics = []string{topic}
	cfg.Storage.URL = "file://" + t.TempDir()
	cfg.Storage.Prefix = "data/"
	cfg.File.MaxRecords = 97 // several files per partition; n is a multiple, so the last one closes too
	cfg.File.MaxAge = time.Hour
	cfg.Format.Fields = []string{"key", "value", "offset", "timestamp", "headers"}
	cfg.Format.ValueEncoding = "base64"
	cfg.Backpressure.MemoryLimit = "128MiB"
	cfg.Admin.Listen = ""
	if cfgFn != nil {
		cfgFn(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	drain(t, cfg, cl, topic)
	return f
}

func createTopic(t testing.TB, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// drain runs the sink until its group committed the end of topic.
func drain(t testing.TB, cfg *config.Config, cl *kgo.Client, topic string) {
	t.Helper()
	end := testkit.EndOffsets(t, cl, topic)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), runner.Options{}) }()
	deadline := time.Now().Add(waitDeadline)
	for !maps.Equal(testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, topic), end) {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("the sink stopped before committing everything: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("group %s never committed the end offsets %v", cfg.Kafka.Group, end)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// restoreTo restores the fixture's storage into dst with opts.
func (f *sourceFixture) restoreTo(t testing.TB, dst string, opts Options) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	b, err := storage.Open(ctx, f.cfg.Storage.URL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	plan, err := Plan(ctx, b, f.cfg.Storage.Prefix, map[string]string{f.topic: dst}, opts.Selection)
	if err != nil {
		return Result{}, err
	}
	names, err := f.cfg.Names()
	if err != nil {
		t.Fatal(err)
	}
	opts.ContentExts = names.ContentExts
	copts, err := source.ClientOptions(f.cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	return Run(ctx, b, plan, opts, copts)
}

const sentinel = "restore-test-sentinel"

// readCommitted reads dst with a read_committed consumer up to a sentinel
// record the test produces at the end of each partition now, so that
// everything committed before is read, duplicates included.
func readCommitted(t *testing.T, cluster *testkit.Cluster, dst string, partitions int32) map[int32][]*kgo.Record {
	t.Helper()
	pcl := cluster.Client(t)
	testkit.Produce(t, pcl, dst, int(partitions), func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i), Headers: []kgo.RecordHeader{{Key: sentinel}}}
	})
	cl := cluster.Client(t, kgo.ConsumeTopics(dst), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32][]*kgo.Record{}
	seen := map[int32]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	for int32(len(seen)) < partitions {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: sentinels of %d partitions of %d seen: %v", dst, len(seen), partitions, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Headers) == 1 && r.Headers[0].Key == sentinel {
				seen[r.Partition] = true
				return
			}
			if !seen[r.Partition] {
				got[r.Partition] = append(got[r.Partition], r)
			}
		})
	}
	return got
}

// compare checks that got holds exactly want, partition by partition and
// in order: key, value, headers (null and empty apart) and timestamp.
func compare(t *testing.T, want, got map[int32][]*kgo.Record) {
	t.Helper()
	for p := range want {
		if len(got[p]) != len(want[p]) {
			t.Errorf("partition %d: %d records, want %d", p, len(got[p]), len(want[p]))
		}
		for i := range min(len(got[p]), len(want[p])) {
			if err := testkit.SameRecord(want[p][i], got[p][i]); err != nil {
				t.Errorf("partition %d record %d: %v", p, i, err)
				return
			}
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok && len(got[p]) > 0 {
			t.Errorf("partition %d: %d records, want none", p, len(got[p]))
		}
	}
}

var errKilled = errors.New("killed by the test")

func openBucket(t *testing.T, cfg *config.Config) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(t.Context(), cfg.Storage.URL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
