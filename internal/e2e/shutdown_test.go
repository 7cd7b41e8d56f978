package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// TestFrozenBrokerDuringShutdown freezes the broker (SIGSTOP) just before a
// graceful stop, while records are being written. The stop can't commit or
// leave the group; spillway must still exit within shutdown.timeout plus a
// small margin, with exit 1 saying what it could not finish. A second run,
// stopped the same way, must exit at once on a second SIGTERM. After both, a
// third run drains the topic, and every record is stored exactly once.
func TestFrozenBrokerDuringShutdown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("freezes a broker process; skipped with -short")
	}
	const (
		group      = "frozen"
		partitions = 4
		records    = 40_000
		timeout    = 6 * time.Second
		// margin covers the process's own start of exit and a loaded
		// machine; the bug this guards against took minutes.
		margin = 5 * time.Second
	)
	out := t.TempDir()
	b := startBroker(t, partitions, scaleTopic)
	admin := b.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := produceInBackground(ctx, b.Client(t, kgo.ProducerLinger(5*time.Millisecond)), scaleTopic, partitions, records, 500, 100)

	frozen := false
	freeze := func(on bool) {
		sig := syscall.SIGCONT
		if on {
			sig = syscall.SIGSTOP
		}
		if err := b.cmd.Process.Signal(sig); err != nil {
			t.Fatalf("signal %v to the broker: %v", sig, err)
		}
		frozen = on
	}
	// The broker must run again for the cleanup's SIGTERM.
	defer func() {
		if frozen {
			freeze(false)
		}
	}()
	config := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  session_timeout: 6s
storage:
  url: "file://%s"
file:
  max_records: 700
  max_age: 1s
admin:
  listen: ""
shutdown:
  timeout: %s
`, b.Addr, group, scaleTopic, out, timeout)

	// One SIGTERM: the deadline ends the stop.
	sp := startSpillway(t, config, nil)
	sp.WaitRunning(t)
	waitCommitted(t, admin, group, scaleTopic, 3_000)
	freeze(true)
	start := time.Now()
	sp.Signal(t, syscall.SIGTERM)
	st := sp.Wait(t, timeout+2*time.Minute)
	took := time.Since(start)
	log := tail(sp.LogPath, 30)
	t.Logf("one SIGTERM with the broker frozen: %s after %s", describeExit(st), took.Round(10*time.Millisecond))
	if took > timeout+margin {
		t.Errorf("exit took %s, want at most shutdown.timeout %s + %s", took, timeout, margin)
	}
	// Which step the deadline ends depends on what the frozen broker left
	// to do: files still open or offsets uncommitted end the stop itself;
	// when the consumer had caught up and committed everything before the
	// freeze (a slow producer on a busy machine), the last step, closing
	// the Kafka client, is what runs out of time, and the exit names
	// shutdown.timeout. Or, having caught up, nothing runs out of time:
	// the client gave up on the frozen broker's connections before the
	// deadline (seen beside four CPU hogs). A clean exit is then true only
	// if every record it says it stored is committed; that is checked
	// once the broker runs again.
	clean := st.ExitCode() == 0 && strings.Contains(log, "stopped cleanly")
	if !clean && (st.ExitCode() != 1 || (!strings.Contains(log, "not finished within shutdown.timeout") &&
		!strings.Contains(log, "did not close within shutdown.timeout"))) {
		t.Errorf("exit: %s, want exit status 1 saying the stop did not finish within shutdown.timeout, or a clean stop with every record stored committed; log:\n%s", describeExit(st), log)
	}
	freeze(false)
	if clean {
		_, after, _ := strings.Cut(log, "stopped cleanly")
		var stored int64
		if _, err := fmt.Sscanf(strings.TrimLeft(after, "\" "), "records_stored=%d", &stored); err != nil {
			t.Fatalf("a clean stop without records_stored (%v); log:\n%s", err, log)
		}
		if committed := sum(testkit.CommittedOffsets(t, admin, group, scaleTopic)); committed != stored {
			t.Errorf("a clean stop with the broker frozen, but %d records committed of the %d it says it stored; log:\n%s", committed, stored, log)
		} else {
			t.Logf("the stop had nothing left for the frozen broker: %d records stored, all committed", stored)
		}
	}

	// Two signals: the second ends the process at once.
	committed := sum(testkit.CommittedOffsets(t, admin, group, scaleTopic))
	sp = startSpillway(t, config, nil)
	sp.WaitRunning(t)
	waitCommitted(t, admin, group, scaleTopic, committed+2_000)
	freeze(true)
	sp.Signal(t, syscall.SIGTERM)
	waitLog(t, sp, "stopping gracefully")
	start = time.Now()
	sp.Signal(t, syscall.SIGTERM)
	st = sp.Wait(t, timeout+2*time.Minute)
	took = time.Since(start)
	t.Logf("second SIGTERM with the broker frozen: %s after %s", describeExit(st), took.Round(10*time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("exit took %s after the second signal, want at once", took)
	}
	if st.Success() {
		t.Errorf("exit: %s after a second signal, want a failure", describeExit(st))
	}
	freeze(false)

	// A last run drains the topic: nothing lost, nothing twice.
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	ends := testkit.EndOffsets(t, admin, scaleTopic)
	sp = startSpillway(t, config, nil)
	sp.WaitRunning(t)
	waitDrained(t, admin, group, scaleTopic, ends, map[string]*spillwayProc{"last": sp})
	sp.Signal(t, syscall.SIGTERM)
	if st := sp.Wait(t, time.Minute); st.ExitCode() != 0 {
		t.Fatalf("last run after SIGTERM: %s, want exit status 0", describeExit(st))
	}
	recs := readStoredOffsets(t, out)
	t.Logf("storage: %d records read back of %d produced", len(recs), records)
	testkit.AssertExactlyOnce(t, recs, scaleTopic, ends)
	checkVerify(t, config, ends)
}

// waitLog waits until the process's log holds s.
func waitLog(t testing.TB, p *spillwayProc, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(p.LogPath); err == nil && strings.Contains(string(b), s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spillway did not log %q within a minute", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
