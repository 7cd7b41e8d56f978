package runner

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/spillway/spillway/internal/admin"
)

func newFake(t *testing.T, port int) *kfake.Cluster {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"), kfake.Ports(port))
	if err != nil {
		t.Fatal(err)
	}
	return fake
}

// Ready is false until the member has its assignment, true once it has,
// false (saying why) while the broker is gone, and true again once it is
// back.
func TestReadiness(t *testing.T) {
	fake := newFake(t, 0)
	var closeOnce atomic.Bool
	closeFake := func() {
		if closeOnce.CompareAndSwap(false, true) {
			fake.Close()
		}
	}
	t.Cleanup(closeFake)
	addr := fake.ListenAddrs()[0]
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig([]string{addr}, t.TempDir())
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var progress atomic.Pointer[Progress]
	var atStart admin.Status
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// OnStart runs before the consumer's first poll.
	opts := Options{OnStart: func(p *Progress) { atStart = p.Status(); progress.Store(p) }}
	log := testLogger(t)
	go func() { done <- Run(ctx, cfg, log, opts) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	defer func() { _ = stop() }()

	waitFor(t, "the pipeline to start", func() bool { return progress.Load() != nil })
	// The client joins in the background from its creation, so on a busy
	// machine the join can finish before OnStart runs (seen beside a CPU
	// hog): then there is no "before" to check.
	if !atStart.Ready && !strings.Contains(atStart.NotReadyReason, `joining consumer group "sink-test"`) {
		t.Errorf("before joining: ready %v, reason %q; want not ready, joining", atStart.Ready, atStart.NotReadyReason)
	}
	status := func() admin.Status { return progress.Load().Status() }
	waitFor(t, "ready", func() bool { return status().Ready })
	if st := status(); st.NotReadyReason != "" {
		t.Errorf("ready with a reason: %q", st.NotReadyReason)
	}

	closeFake()
	waitFor(t, "not ready with the broker gone", func() bool {
		st := status()
		return !st.Ready && strings.Contains(st.NotReadyReason, "unreachable") && strings.Contains(st.NotReadyReason, addr)
	})

	back := newFake(t, port)
	t.Cleanup(back.Close)
	waitFor(t, "ready again with the broker back", func() bool { return status().Ready })
	// The new broker is empty, unlike a restarted one: it knows nothing
	// of the group, so leaving it on the stop may fail. Run must still
	// return, with the client closed (goleak checks).
	_ = stop()
}
