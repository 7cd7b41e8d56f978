package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/testkit"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
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

// TestCleanRevokeLogsNoWarning: when a second instance joins and takes half
// the partitions, the first flushes and commits them; a clean flush must not
// be reported as files "not flushed in time" and "abandoned".
func TestCleanRevokeLogsNoWarning(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 4, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 4000, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.File.MaxAge = time.Hour // files stay open until the revoke closes them
	cfg.Kafka.SessionTimeout = 6 * time.Second

	var logs [2]syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := slog.New(slog.NewTextHandler(&logs[i], &slog.HandlerOptions{Level: slog.LevelInfo}))
			errs[i] = Run(ctx, cfg, log, Options{})
		}()
	}
	start(0)
	waitFor(t, "the first instance to hold open files", func() bool {
		return strings.Contains(logs[0].String(), "spillway running") && len(testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events")) == 0
	})
	// Let it write into its files before the second joins.
	testkit.Produce(t, cl, "events", 400, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, `{"j":%d}`, i)}
	})
	start(1)
	waitFor(t, "the revoke to commit the moved partitions", func() bool {
		var n int64
		for _, o := range testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events") {
			n += o
		}
		return n > 0
	})
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	for i := range logs {
		if s := logs[i].String(); strings.Contains(s, "not flushed") || strings.Contains(s, "abandoned") {
			t.Errorf("instance %d logged a failed flush after a clean revoke:\n%s", i, s)
		}
	}
}

// TestFatalStopLogsNoRevokeWarning: a fatal stop (a record the registry
// does not know, errors.tolerance none) logs its error, and not also that
// revoked partitions were "not flushed in time": the client's close
// revokes them after the sink stopped, which every fatal stop used to
// report so.
func TestFatalStopLogsNoRevokeWarning(t *testing.T) {
	t.Parallel()
	reg := testkit.StartRegistry(t, registrySeeds, "", "")
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 3, func(i int) *kgo.Record {
		if i == 1 {
			b, _ := new(sr.ConfluentHeader).AppendEncode(nil, 42, nil)
			return &kgo.Record{Value: append(b, 0)}
		}
		return &kgo.Record{Value: event(t, v1ID, i)}
	})
	cfg := registryConfig(cluster, t.TempDir(), reg.URL(), "parquet", "fatal-revoke")
	logs := &syncBuffer{}
	err := Run(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{})
	if err == nil || !strings.Contains(err.Error(), "schema id 42") {
		t.Fatalf("Run = %v, want the fatal error of schema id 42", err)
	}
	if s := logs.String(); !strings.Contains(s, "stopping after a fatal error") || strings.Contains(s, "not flushed") {
		t.Errorf("want the fatal error logged, and no revoke warning; log:\n%s", s)
	}
}

// TestStopCommitRefused: a graceful stop whose final commit the broker
// refuses fails at once, saying the files are stored and the offsets not
// committed; it does not blame shutdown.timeout, which it used to for any
// failure of the stop.
func TestStopCommitRefused(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 100, func(i int) *kgo.Record {
		return &kgo.Record{Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	// No stand-in refuses commits on demand: kfake's control hook answers
	// every OffsetCommit with a partition error that is not retried.
	cluster.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.Fake().KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	cfg := testConfig(cluster.Addrs(), t.TempDir())
	cfg.Kafka.Group = "stop-commit-refused"
	cfg.File.MaxAge = time.Hour // the stop stores the file
	cfg.Shutdown.Timeout = 10 * time.Minute
	progress, stop := started(t, cfg)
	waitFor(t, "every record written", func() bool { p := progress(); return p != nil && p.Sink().Records == 100 })
	err := stop()
	if err == nil {
		t.Fatal("the stop succeeded though the commit was refused")
	}
	msg := err.Error()
	if strings.Contains(msg, "shutdown.timeout") || !strings.Contains(msg, "files are stored, but their offsets could not all be committed") ||
		!strings.Contains(msg, "OFFSET_METADATA_TOO_LARGE") {
		t.Errorf("stop: %v; want the refused commit named, and shutdown.timeout not blamed", err)
	}
}
