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

	"github.com/twmb/franz-go/pkg/kgo"

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
