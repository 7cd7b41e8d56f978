package source_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/testkit"
)

// shared is the kfake cluster that the tests without fault injection
// share: each makes a topic of its own (testkit.Cluster.Topic), named after
// it, and uses that name as its group. It is set once, before any test.
var shared *testkit.Cluster

func TestMain(m *testing.M) {
	c, err := testkit.StartCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	c.Fake().Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitDeadline only turns a hang into a failure: the tests run in
// parallel, on machines shared with other work.
const waitDeadline = 5 * time.Minute

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopAtEnd waits until w was handed every record of topic up to end,
// stops r gracefully (which stores what is open, as a file's max_age
// would), and checks that the group's commits are then end.
func stopAtEnd(t *testing.T, r *running, w *memWriter, cl *kgo.Client, group, topic string, end map[int32]int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the records up to %v to be written", end), func() bool { return w.Reached(topic, end) })
	if runErr, err := r.stop(); runErr != nil || err != nil {
		t.Fatalf("graceful stop: run %v, stop %v", runErr, err)
	}
	if got := testkit.CommittedOffsets(t, cl, group, topic); !maps.Equal(got, end) {
		t.Fatalf("after the stop, committed %v, want the end offsets %v", got, end)
	}
}

// kafkaFor is the source's config for topic on c, with topic as the group.
func kafkaFor(c *testkit.Cluster, topic string) config.Kafka {
	k := config.Default().Kafka
	k.Brokers, k.Topics, k.Group = c.Addrs(), []string{topic}, topic
	return k
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// running is a Source whose Run runs in the background.
type running struct {
	src    *source.Source
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	runErr error
	err    error
}

// start builds a Source over w and runs it until stop. The test's
// cleanup stops it, if the test did not.
func start(t *testing.T, k config.Kafka, plan budget.Plan, w source.Writer, b *budget.Budget, log *slog.Logger) *running {
	t.Helper()
	src, err := source.New(k, plan, w, b, 10*time.Second, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{src: src, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- src.Run(ctx, context.Background()) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop is a graceful stop, as the runner's: Run ends, Shutdown stores and
// commits, Close releases the client. It returns Run's error, and
// Shutdown's.
func (r *running) stop() (runErr, shutdownErr error) {
	r.once.Do(func() {
		r.cancel()
		r.runErr = <-r.done
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r.err = r.src.Shutdown(ctx)
		_ = r.src.Close(ctx)
	})
	return r.runErr, r.err
}

// memWriter is a source.Writer that holds records in memory, as the sink
// holds them in open files: a partition's records are stored (durable, and
// committable) when fileRecords of them are open, on Flush, and on
// Relieve; the budget counts what is open. Stall makes storage stop taking
// anything, as storage.Faults does for the sink. What these tests assert
// is the source's side of the contract, which needs no files.
type memWriter struct {
	b           *budget.Budget
	fileRecords int // records that close a partition's file; 0: only Flush and Relieve do

	mu       sync.Mutex
	open     map[offsets.TopicPartition][]*kgo.Record
	openSize map[offsets.TopicPartition]int64
	durable  map[offsets.TopicPartition]int64 // to commit, popped by Committable
	stored   []testkit.StoredRecord
	files    int
	written  int
	stalled  chan struct{} // non-nil while storage is stalled; closed when it comes back
	wake     chan struct{}
}

func newMemWriter(b *budget.Budget, fileRecords int) *memWriter {
	return &memWriter{b: b, fileRecords: fileRecords,
		open: map[offsets.TopicPartition][]*kgo.Record{}, openSize: map[offsets.TopicPartition]int64{},
		durable: map[offsets.TopicPartition]int64{}}
}

// WriteSome takes records until the budget is over its limit.
func (w *memWriter) WriteSome(_ context.Context, recs []*kgo.Record) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, r := range recs {
		if w.b != nil && w.b.Over() {
			return i, nil
		}
		tp := offsets.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		n := source.RecordSize(r)
		if w.b != nil {
			w.b.Acquire(budget.QueuedRecords, n)
		}
		w.open[tp] = append(w.open[tp], r)
		w.openSize[tp] += n
		w.written++
		if w.fileRecords > 0 && len(w.open[tp]) >= w.fileRecords && w.stalled == nil {
			w.storeLocked(tp)
		}
	}
	return len(recs), nil
}

// storeLocked stores tp's open records as one file.
func (w *memWriter) storeLocked(tp offsets.TopicPartition) {
	recs := w.open[tp]
	if len(recs) == 0 {
		return
	}
	for _, r := range recs {
		w.stored = append(w.stored, testkit.StoredRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
	}
	w.durable[tp] = recs[len(recs)-1].Offset + 1
	if w.b != nil {
		w.b.Release(budget.QueuedRecords, w.openSize[tp])
	}
	delete(w.open, tp)
	delete(w.openSize, tp)
	w.files++
	if w.wake != nil {
		close(w.wake)
		w.wake = nil
	}
}

func (w *memWriter) storeAllLocked(tps map[offsets.TopicPartition]bool) {
	for tp := range w.open {
		if tps == nil || tps[tp] {
			w.storeLocked(tp)
		}
	}
}

// Flush stores tps' open records, once storage takes them.
func (w *memWriter) Flush(ctx context.Context, tps map[offsets.TopicPartition]bool, _ offsets.Reason) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.stalled != nil {
		back := w.stalled
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			w.mu.Lock()
			return fmt.Errorf("flush while storage is stalled: %w", ctx.Err())
		case <-back:
		}
		w.mu.Lock()
	}
	w.storeAllLocked(tps)
	return nil
}

func (w *memWriter) Committable(only map[offsets.TopicPartition]bool) map[offsets.TopicPartition]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[offsets.TopicPartition]int64{}
	for tp, off := range w.durable {
		if only == nil || only[tp] {
			out[tp] = off
			delete(w.durable, tp)
		}
	}
	return out
}

func (w *memWriter) Durable() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wake == nil {
		w.wake = make(chan struct{})
	}
	return w.wake
}

// Drop forgets tps' open records, unstored.
func (w *memWriter) Drop(tps map[offsets.TopicPartition]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for tp := range tps {
		if w.b != nil {
			w.b.Release(budget.QueuedRecords, w.openSize[tp])
		}
		delete(w.open, tp)
		delete(w.openSize, tp)
		delete(w.durable, tp)
	}
}

func (w *memWriter) Assign(offsets.TopicPartition, ledger.Identity, ledger.Point) {}
func (w *memWriter) Err() error                                                   { return nil }
func (w *memWriter) LogStart(offsets.TopicPartition, int64, int64)                {}

// Relieve stores every open record, unless storage is stalled.
func (w *memWriter) Relieve(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stalled == nil {
		w.storeAllLocked(nil)
	}
	return nil
}

// Stall makes storage take nothing until Resume.
func (w *memWriter) Stall() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stalled == nil {
		w.stalled = make(chan struct{})
	}
}

// Resume brings storage back: what is open is stored, as the uploads
// that waited finish.
func (w *memWriter) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stalled != nil {
		close(w.stalled)
		w.stalled = nil
	}
	w.storeAllLocked(nil)
}

// Reached tells whether the records handed over reach end in every
// partition of topic.
func (w *memWriter) Reached(topic string, end map[int32]int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := map[int32]int64{}
	for _, r := range w.stored {
		next[r.Partition] = max(next[r.Partition], r.Offset+1)
	}
	for tp, recs := range w.open {
		if tp.Topic == topic && len(recs) > 0 {
			next[tp.Partition] = max(next[tp.Partition], recs[len(recs)-1].Offset+1)
		}
	}
	for p, e := range end {
		if next[p] < e {
			return false
		}
	}
	return true
}

// Written is how many records the source handed over.
func (w *memWriter) Written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Files is how many files were stored.
func (w *memWriter) Files() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files
}

// Stored is every record stored, in the order stored.
func (w *memWriter) Stored() []testkit.StoredRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]testkit.StoredRecord(nil), w.stored...)
}
