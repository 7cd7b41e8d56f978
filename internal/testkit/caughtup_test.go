package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRunUntilCommitted: a consumer group that commits what it reads
// stands for a run. RunUntilCommitted returns once the group's commits
// reach the log end and the run stopped without error, and fails when the
// run stops before that.
func TestRunUntilCommitted(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, 2, "events")
	cl := c.Client(t)
	Produce(t, cl, "events", 100, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}
	})
	end := EndOffsets(t, cl, "events")

	consume := func(ctx context.Context) error {
		g, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("events"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return err
		}
		defer g.Close()
		for ctx.Err() == nil {
			fs := g.PollFetches(ctx)
			if ctx.Err() != nil {
				break
			}
			if err := fs.Err0(); err != nil {
				return err
			}
			if err := g.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	}
	RunUntilCommitted(t, cl, "g", "events", end, consume)

	stopped := errors.New("stopped at once")
	r := capture(t, func(tb testing.TB) {
		RunUntilCommitted(tb, cl, "g2", "events", end, func(context.Context) error { return stopped })
	})
	if !strings.Contains(r.text(), "the run stopped before its commit reached the log end: stopped at once") {
		t.Errorf("a run that stopped early: %q", r.text())
	}
}
