package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// hostile is record i of a source partition: binary keys and values with
// NUL and invalid UTF-8, null keys, tombstones, empty keys and values,
// repeated, binary, null and empty header values, and timestamps that are
// old and out of order.
func hostile(i int, partition int32) *kgo.Record {
	r := &kgo.Record{Partition: partition}
	switch i % 5 {
	case 0:
		r.Key = nil
	case 1:
		r.Key = []byte{}
	case 2:
		r.Key = []byte{0, 0xff, 0xfe, 'k', 0, byte(i)}
	default:
		r.Key = fmt.Appendf(nil, "key-%d", i)
	}
	switch i % 7 {
	case 0:
		r.Value = nil // a tombstone
	case 1:
		r.Value = []byte{}
	case 2:
		r.Value = append([]byte{0, 0xc3, 0x28, '\n', '"', '\\'}, bytes.Repeat([]byte{byte(i)}, i%300)...)
	case 3:
		r.Value = []byte(`{"a": 1,` + "\n" + ` "b": "x"}`)
	default:
		r.Value = fmt.Appendf(nil, `"v%d"`, i)
	}
	switch i % 4 {
	case 1:
		r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte{0, 0xff}}, {Key: "n", Value: nil}, {Key: "e", Value: []byte{}}}
	case 2:
		r.Headers = []kgo.RecordHeader{{Key: "only", Value: []byte("x")}}
	}
	// Old (1990s, even before 1970) and out of order.
	r.Timestamp = time.UnixMilli(int64(631152000000 + (i%3)*86400000 - i*1000))
	if i%11 == 5 {
		r.Timestamp = time.UnixMilli(1234)
	}
	return r
}

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
		r := hostile(i, p)
		f.want[p] = append(f.want[p], hostile(i, p))
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
			if err := sameRecord(want[p][i], got[p][i]); err != nil {
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

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func sameRecord(want, got *kgo.Record) error {
	switch {
	case !sameBytes(want.Key, got.Key):
		return fmt.Errorf("key %q (nil %v), want %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !sameBytes(want.Value, got.Value):
		return fmt.Errorf("value %q (nil %v), want %q (nil %v)", got.Value, got.Value == nil, want.Value, want.Value == nil)
	case want.Timestamp.UnixMilli() != got.Timestamp.UnixMilli():
		return fmt.Errorf("timestamp %d, want %d", got.Timestamp.UnixMilli(), want.Timestamp.UnixMilli())
	case len(want.Headers) != len(got.Headers):
		return fmt.Errorf("headers %v, want %v", got.Headers, want.Headers)
	}
	for i := range want.Headers {
		if want.Headers[i].Key != got.Headers[i].Key || !sameBytes(want.Headers[i].Value, got.Headers[i].Value) {
			return fmt.Errorf("header %d %q=%q (nil %v), want %q=%q (nil %v)", i, got.Headers[i].Key, got.Headers[i].Value, got.Headers[i].Value == nil,
				want.Headers[i].Key, want.Headers[i].Value, want.Headers[i].Value == nil)
		}
	}
	return nil
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
