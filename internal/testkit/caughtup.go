package testkit

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// caughtUpTimeout bounds how long RunUntilCommitted waits for a run to
// commit the log end.
const caughtUpTimeout = 2 * time.Minute

// RunUntilCommitted runs run (a pipeline: runner.Run with a config, say)
// until group's commits on topic equal end, then cancels it and expects it
// to stop cleanly: the graceful stop is part of what the caller tests. It
// fails the test when the run stops before its commits reach end, or they
// don't within two minutes; the run is stopped and waited for either way,
// so that no goroutine outlives the test. run is a function, not a config,
// so that testkit need not import the runner, whose tests import testkit.
func RunUntilCommitted(t testing.TB, cl *kgo.Client, group, topic string, end map[int32]int64, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	running := true
	defer func() {
		cancel()
		if running {
			<-done
		}
	}()
	deadline := time.Now().Add(caughtUpTimeout)
	for !maps.Equal(CommittedOffsets(t, cl, group, topic), end) {
		select {
		case err := <-done:
			running = false
			t.Fatalf("the run stopped before its commit reached the log end: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets never reached the end offsets: %v, want %v", CommittedOffsets(t, cl, group, topic), end)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	running = false
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
