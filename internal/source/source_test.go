package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/testkit"
)

// recordingSink stands in for the sink: what is under test is the source's
// side of their contract (what it writes, when), not files.
type recordingSink struct {
	mu      sync.Mutex
	written int
	largest int // the most records one write was given
	err     error
	wake    chan struct{}
}

func (s *recordingSink) WriteSome(_ context.Context, recs []*kgo.Record) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written += len(recs)
	s.largest = max(s.largest, len(recs))
	return len(recs), nil
}

func (s *recordingSink) Flush(context.Context, map[offsets.TopicPartition]bool, offsets.Reason) error {
	return nil
}

func (s *recordingSink) Committable(map[offsets.TopicPartition]bool) map[offsets.TopicPartition]int64 {
	return nil
}
func (s *recordingSink) Durable() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

func (s *recordingSink) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Relieve has nothing to close: recordingSink holds no files.
func (s *recordingSink) Relieve(context.Context) error                 { return nil }
func (s *recordingSink) LogStart(offsets.TopicPartition, int64, int64) {}

// fail is an upload failing in the background: the error, then a wake.
func (s *recordingSink) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

func (s *recordingSink) Drop(map[offsets.TopicPartition]bool)                         {}
func (s *recordingSink) Assign(offsets.TopicPartition, ledger.Identity, ledger.Point) {}

// When it can't learn where storage ends for an assigned partition, the
// source stops with that error before writing any record: consuming from the
// committed offset instead could store records twice.
func TestResumeFailureStopsBeforeWriting(t *testing.T) {
	c := testkit.NewCluster(t, 2, "events")
	testkit.Produce(t, c.Client(t), "events", 100, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}
	})
	rec := &recordingSink{}
	listErr := errors.New("injected: list refused")
	src := newSource(t, c, rec, func(context.Context, ledger.Identity, ledger.Log) (ledger.Point, error) {
		return ledger.Point{}, listErr
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := src.Run(ctx, ctx)
	if !errors.Is(err, listErr) || !strings.Contains(err.Error(), "resume from storage") {
		t.Fatalf("Run = %v, want the resume error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run only returned at the test's deadline")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.written != 0 {
		t.Fatalf("%d records written after resuming from storage failed", rec.written)
	}
}

// TestStopEndsAHeldResume: a resume from storage that a broker or the
// store holds (a request that never answers) ends when the run stops, and
// Close returns with the client closed. The resume once ran on the
// client's context, which its Close cancels only after leaving the group,
// and leaving waits for the callback that runs the resume: the stop ran
// out of its deadline and left the callback running (goleak checks).
func TestStopEndsAHeldResume(t *testing.T) {
	c := testkit.NewCluster(t, 1, "events")
	k := config.Default().Kafka
	k.Brokers, k.Topics, k.Group = c.Addrs(), []string{"events"}, "g"
	held := make(chan struct{})
	var once sync.Once
	resumer := func(ctx context.Context, _ ledger.Identity, _ ledger.Log) (ledger.Point, error) {
		once.Do(func() { close(held) })
		<-ctx.Done()
		return ledger.Point{}, fmt.Errorf("held resume: %w", ctx.Err())
	}
	src, err := source.New(k, budget.Plan{}, &recordingSink{}, budget.New(64<<20, 0), 10*time.Second, resumer, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(stop, context.Background()) }()
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the partition was never assigned")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v after a stop during the resume, want nil: the stop is not the resume's error", err)
		}
	case <-time.After(2 * time.Minute):
		// The client is left to the process's end, as a run does.
		t.Fatal("Run did not return within 2 minutes of the stop: the held resume held it")
	}
	// Far past any resume's own retries: only a resume that ignored the
	// stop holds Close this long.
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	if err := src.Close(cctx); err != nil {
		t.Fatalf("Close: %v: the held resume held the client's close", err)
	}
}

// TestSinkFailureStopsIdleRun: an upload that fails while no record
// arrives (the last file of an idle partition) ends Run with its error.
// The error once waited for the next record, so an idle run stayed up,
// ready, with nothing stored and nothing said.
func TestSinkFailureStopsIdleRun(t *testing.T) {
	c := testkit.NewCluster(t, 1, "events")
	rec := &recordingSink{}
	ctx, _, done := runSource(t, c, rec)
	// Wait until the commit loop waits on the sink, then fail it.
	for {
		rec.mu.Lock()
		waiting := rec.wake != nil
		rec.mu.Unlock()
		if waiting {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	upload := errors.New("injected: upload of t-0-0.jsonl failed")
	rec.fail(upload)
	select {
	case err := <-done:
		if !errors.Is(err, upload) {
			t.Fatalf("Run = %v, want the upload error", err)
		}
	case <-ctx.Done():
		t.Fatal("Run went on idling after the sink failed")
	}
}

// TestResumeFailureCancelsTheOthers: when one partition's resume from
// storage fails, the others' are cancelled, so the run stops with that
// error at once. They once ran on to their own end: a partition whose
// store does not answer held the failed assignment, and the run, until
// the stop.
func TestResumeFailureCancelsTheOthers(t *testing.T) {
	c := testkit.NewCluster(t, 3, "events")
	listErr := errors.New("injected: list refused")
	var started sync.WaitGroup
	started.Add(2) // partitions 1 and 2
	var mu sync.Mutex
	var ends []error
	resumer := func(ctx context.Context, id ledger.Identity, _ ledger.Log) (ledger.Point, error) {
		if id.Partition == 0 {
			// Fail once the others are reading, so only the cancel ends them.
			started.Wait()
			return ledger.Point{}, listErr
		}
		started.Done()
		<-ctx.Done()
		mu.Lock()
		defer mu.Unlock()
		ends = append(ends, context.Cause(ctx))
		return ledger.Point{}, ctx.Err()
	}
	src := newSource(t, c, &recordingSink{}, resumer)
	// The deadline only turns a hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := src.Run(ctx, ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run = %v only at the test's deadline: the failed partition's error did not cancel the others", err)
	}
	if !errors.Is(err, listErr) || !strings.Contains(err.Error(), "events/0") {
		t.Fatalf("Run = %v, want partition 0's resume error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 2 {
		t.Fatalf("%d of the 2 other partitions' resumes ended, want both", len(ends))
	}
	for _, e := range ends {
		if !errors.Is(e, listErr) {
			t.Errorf("another partition's resume ended for %v, want partition 0's error", e)
		}
	}
}

// TestResumeFailureBeforeRunStopsIt: the client joins the group from New
// on, so the first assignment, and a resume that fails in it, may come
// before Run starts. Run must still end with that error at once: it used
// to poll first, and on an idle topic the poll waited until the stop.
func TestResumeFailureBeforeRunStopsIt(t *testing.T) {
	t.Parallel()
	c := testkit.NewCluster(t, 1, "events")
	listErr := errors.New("injected: list refused")
	src := newSource(t, c, &recordingSink{}, func(context.Context, ledger.Identity, ledger.Log) (ledger.Point, error) {
		return ledger.Point{}, listErr
	})
	// The deadline only turns a hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The assignment's callback has returned, its error recorded, before
	// Run starts: health says so only after the callback.
	testkit.Eventually(t, "the failed resume recorded", func() bool {
		return strings.Contains(src.Health().Reason, listErr.Error())
	})
	err := src.Run(ctx, ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run = %v only at the test's deadline: a resume that failed before Run did not stop it", err)
	}
	if !errors.Is(err, listErr) {
		t.Fatalf("Run = %v, want the resume's error", err)
	}
}

// TestPollTakesTheWholeFetch: a poll hands the sink every record the
// client has buffered, not a slice of them. The client asks the broker
// for its next fetch only once the buffered one is taken whole, so a poll
// capped below a fetch's records (it once took at most 10,000) kept the
// broker idle while the first part was written. Here one fetch holds
// 20,000 small records (produced before the run, well under a fetch's
// bytes), so one write must be given all of them.
func TestPollTakesTheWholeFetch(t *testing.T) {
	t.Parallel()
	const n = 20_000
	c := testkit.NewCluster(t, 1, "events")
	testkit.Produce(t, c.Client(t), "events", n, func(i int) *kgo.Record {
		return &kgo.Record{Value: []byte{byte(i)}}
	})
	rec := &recordingSink{}
	_, cancel, done := runSource(t, c, rec)
	testkit.Eventually(t, "every record written", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.written >= n
	})
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.largest != n {
		t.Fatalf("the largest write was given %d records, want all %d of the one fetch", rec.largest, n)
	}
}

// runSource runs a source of c's topic events, group g, into rec, without a
// resumer, until the test's two minutes end or cancel is called; Run's
// result comes on done. The source is closed when the test ends.
func runSource(t *testing.T, c *testkit.Cluster, rec *recordingSink) (ctx context.Context, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	src := newSource(t, c, rec, nil)
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ran := make(chan error, 1)
	go func() { ran <- src.Run(ctx, ctx) }()
	return ctx, cancel, ran
}

// newSource makes a source of c's topic events, group g, into rec, with
// resume (nil for none), closed when the test ends. The client joins the
// group at once, before Run.
func newSource(t *testing.T, c *testkit.Cluster, rec *recordingSink, resume source.Resumer) *source.Source {
	t.Helper()
	k := config.Default().Kafka
	k.Brokers, k.Topics, k.Group = c.Addrs(), []string{"events"}, "g"
	src, err := source.New(k, budget.Plan{}, rec, budget.New(64<<20, 0), 10*time.Second, resume, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src
}
