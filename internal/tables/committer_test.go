package tables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memTable is a table that keeps its state in memory: the files of its
// snapshots, in commit order, and each partition's last ledger seq, held
// by seq as package iceberg's table holds them. The loop's scheduling
// tests use it where the real table can't give what they need: a commit
// that fails, or is applied and its answer lost (TestFailedCommits), a
// signal per commit to wait on instead of time, and files that are only
// ledger keys with nothing stored. TestSinkLedgerTableAcrossACrash runs
// the real sink, ledger and SQLite catalog, and internal/e2e the binary.
type memTable struct {
	mu      sync.Mutex
	files   []File // in commit order
	next    map[string]map[int32]int64
	commits int
	// fail, when set, is asked before each commit: an error fails it,
	// unapplied, or applied (the answer lost) when after is true.
	fail func(n int) (err error, after bool)
	done chan int // each commit's number, when set
}

func newMemTable() *memTable {
	return &memTable{next: map[string]map[int32]int64{}}
}

func (m *memTable) Held(_ context.Context, topic, _ string) (map[int32]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]int64{}
	for p, n := range m.next[topic] {
		out[p] = n
	}
	return out, nil
}

func (m *memTable) Commit(_ context.Context, files []File) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits++
	var err error
	after := false
	if m.fail != nil {
		err, after = m.fail(m.commits)
	}
	if err != nil && !after {
		return err
	}
	for _, f := range files {
		// Held by ledger seq, as package iceberg's table decides; a file
		// held twice would show in files.
		if n, ok := m.next[f.Topic][f.Partition]; ok && f.Seq <= n {
			continue
		}
		m.files = append(m.files, f)
		if m.next[f.Topic] == nil {
			m.next[f.Topic] = map[int32]int64{}
		}
		m.next[f.Topic][f.Partition] = f.Seq
	}
	if m.done != nil {
		m.done <- m.commits
	}
	return err
}

// locations are the files held, in commit order.
func (m *memTable) locations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, f := range m.files {
		out = append(out, f.Location)
	}
	return out
}

type memCatalog struct{ t *memTable }

func (c memCatalog) Location(name string) string { return "mem://wh/" + name }
func (c memCatalog) Table(context.Context, string) (Table, error) {
	return c.t, nil
}

// testLedger is a real ledger in a local directory, with the entries of
// partition 0 of topic t appended by add.
type testLedger struct {
	l    *ledger.Ledger
	b    *storage.Bucket
	id   ledger.Identity
	seq  int64
	next offsets.State
	// unpublished makes add write the entry but not its file: a writer
	// that died between the two.
	unpublished bool
}

func newTestLedger(t *testing.T) *testLedger {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &testLedger{l: ledger.New(b, ""), b: b, id: ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0}}
}

// add appends the entry of a file holding ranges (a gap-only entry for
// none), and returns it.
func (l *testLedger) add(t *testing.T, ranges ...[2]int64) ledger.Entry {
	t.Helper()
	e := ledger.Entry{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0, Seq: l.seq, Time: time.Now(), Before: l.next}
	var rs offsets.Ranges
	for _, r := range ranges {
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		e.Gaps = []offsets.Gap{{Ranges: offsets.Ranges{{l.next.Next, l.next.Next + 1}}, Cause: offsets.GapRetention}}
	} else {
		e.File = ledger.FileInfo{Key: fmt.Sprintf("t-0-%d.parquet", rs[0][0]), Ranges: rs, Records: int64(len(rs)), Bytes: 100}
	}
	if err := l.l.Append(context.Background(), &e); err != nil {
		t.Fatal(err)
	}
	if e.HasFile() && !l.unpublished {
		if err := l.b.Put(context.Background(), e.File.Key, make([]byte, e.File.Bytes), nil); err != nil {
			t.Fatal(err)
		}
	}
	l.seq++
	l.next = e.After()
	return e
}

func tp0() offsets.TopicPartition { return offsets.TopicPartition{Topic: "t", Partition: 0} }

func newTestCommitter(t *testing.T, m *memTable, l *testLedger, o Options) *Committer {
	t.Helper()
	o.Table, o.Base = "kafka.{{topic}}", "mem://out/"
	if o.Interval == 0 {
		o.Interval = time.Hour
	}
	o.MinBackoff, o.MaxBackoff = time.Millisecond, 10*time.Millisecond
	return New(memCatalog{m}, l.l, o, slog.New(slog.DiscardHandler))
}

func keys(es ...ledger.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, "mem://out/"+e.File.Key)
	}
	return out
}

// TestCatchUpCommitsTheLedgerFirst: on assignment, the entries the table
// lacks are committed first, in ledger order, then the files the sink
// publishes; a gap-only entry commits nothing; nothing the table holds is
// committed again.
func TestCatchUpCommitsTheLedgerFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, l := newMemTable(), newTestLedger(t)
	e0, e1 := l.add(t, [2]int64{0, 10}), l.add(t, [2]int64{10, 20})
	if err := m.Commit(ctx, []File{fileOf("mem://out/", &e0), fileOf("mem://out/", &e1)}); err != nil {
		t.Fatal(err)
	}
	// Stored, in the ledger, never committed: a crash after the uploads.
	e2, _, e4 := l.add(t, [2]int64{20, 30}), l.add(t), l.add(t, [2]int64{31, 40})
	c := newTestCommitter(t, m, l, Options{})
	c.Assigned(tp0(), l.id)
	// Published while the catch-up has not run: it must wait behind it.
	e5 := l.add(t, [2]int64{40, 50})
	c.Published(tp0(), e5)
	// Due, even forced, the published file waits while the partition has
	// not caught up: committed now, it would pass e2 and e4.
	if err := c.commit(ctx, true); err != nil {
		t.Fatal(err)
	}
	if n := len(m.locations()); n != 2 {
		t.Fatalf("the table holds %d files before the catch-up, want the 2 it had", n)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := m.locations(), keys(e0, e1, e2, e4, e5); !slices.Equal(got, want) {
		t.Errorf("table holds\n %v\nwant\n %v", got, want)
	}
}

// TestVoidEntryNotCommitted: a writer died after its ledger entry and
// before publishing the file; the writer that resumed wrote the same
// offsets again under the same name with the next entry. The table gets
// the file once, whether the catch-up reads the ledger before the new
// entry (the void one is last, its file not there), after it (the next
// entry does not count it as stored), or both entries reach the queue.
// Committing the void entry too put [10, 20) in twice, and the table's
// refusal stopped the run at every start (a CI rehearsal of the crash
// test found it).
func TestVoidEntryNotCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// void writes e0 (published), then e1 (never published), then e2: the
	// resumed writer's, from e1's state before, under e1's name.
	void := func(t *testing.T, l *testLedger) (e0, e1 ledger.Entry, e2 func() ledger.Entry) {
		e0 = l.add(t, [2]int64{0, 10})
		l.unpublished = true
		e1 = l.add(t, [2]int64{10, 20})
		l.unpublished = false
		return e0, e1, func() ledger.Entry {
			l.next = e1.Before
			return l.add(t, [2]int64{10, 20})
		}
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *Committer, l *testLedger, e1 ledger.Entry, e2 func() ledger.Entry) ledger.Entry
	}{
		{"catch-up before the new entry", func(t *testing.T, c *Committer, l *testLedger, _ ledger.Entry, e2 func() ledger.Entry) ledger.Entry {
			c.Assigned(tp0(), l.id)
			if err := c.catchUp(ctx); err != nil {
				t.Fatal(err)
			}
			// A commit before the new entry: e1 must not be in it.
			if err := c.commit(ctx, true); err != nil {
				t.Fatal(err)
			}
			e := e2()
			c.Published(tp0(), e)
			return e
		}},
		{"catch-up after it", func(t *testing.T, c *Committer, l *testLedger, _ ledger.Entry, e2 func() ledger.Entry) ledger.Entry {
			e := e2()
			c.Assigned(tp0(), l.id)
			c.Published(tp0(), e)
			return e
		}},
		{"both queued", func(t *testing.T, c *Committer, l *testLedger, e1 ledger.Entry, e2 func() ledger.Entry) ledger.Entry {
			c.Assigned(tp0(), l.id)
			if err := c.catchUp(ctx); err != nil {
				t.Fatal(err)
			}
			e := e2()
			c.Published(tp0(), e1) // as a catch-up that saw e1's name filled would queue it
			c.Published(tp0(), e)
			return e
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, l := newMemTable(), newTestLedger(t)
			e0, e1, e2 := void(t, l)
			c := newTestCommitter(t, m, l, Options{})
			e := tc.run(t, c, l, e1, e2)
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got, want := m.locations(), keys(e0, e); !slices.Equal(got, want) {
				t.Errorf("table holds\n %v\nwant\n %v", got, want)
			}
		})
	}
}

// TestRestartSkipsWhatTheTableHolds: a crash after the commit and before
// Kafka's (the table holds everything), or during the commit (applied,
// the answer lost): the next owner's catch-up adds nothing twice.
func TestRestartSkipsWhatTheTableHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, l := newMemTable(), newTestLedger(t)
	var es []ledger.Entry
	for i := range int64(4) {
		es = append(es, l.add(t, [2]int64{10 * i, 10*i + 10}))
	}
	first := newTestCommitter(t, m, l, Options{})
	first.Assigned(tp0(), l.id)
	// The commit is applied, and its answer lost.
	m.fail = func(n int) (error, bool) {
		if n == 1 {
			return errors.New("connection reset"), true
		}
		return nil, false
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A new owner (the process restarted, Kafka's commit lost).
	second := newTestCommitter(t, m, l, Options{})
	second.Assigned(tp0(), l.id)
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := m.locations(), keys(es...); !slices.Equal(got, want) {
		t.Errorf("table holds\n %v\nwant each file once:\n %v", got, want)
	}
}

// TestCatchUpWithInterleavedFiles: a partition split by day interleaves
// its files' offsets, so several entries can end where the table's Next
// is; the catch-up queues them all, and the table keeps each once. A
// catch-up that took only the entries past Next would lose the file
// of [5,6).
func TestCatchUpWithInterleavedFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, l := newMemTable(), newTestLedger(t)
	// Offset 0 stays in an open file (day 1) while day 2's files close.
	a := l.add(t, [2]int64{1, 3}) // Before 0, After 0 (1-2 above)
	b := l.add(t, [2]int64{5, 6}) // After 0
	if err := m.Commit(ctx, []File{fileOf("mem://out/", &a)}); err != nil {
		t.Fatal(err)
	}
	d := l.add(t, [2]int64{0, 1}, [2]int64{3, 5}) // After 6
	c := newTestCommitter(t, m, l, Options{})
	c.Assigned(tp0(), l.id)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := m.locations(), keys(a, b, d); !slices.Equal(got, want) {
		t.Errorf("table holds\n %v\nwant\n %v", got, want)
	}
}

// TestCommitsOnVolumeAndTime: files wait for commit_interval, but not
// once they pass MaxPendingBytes; and at the interval on their own.
func TestCommitsOnVolumeAndTime(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		o        Options
		files    int
		wantMore int // files the first commit holds
	}{
		{"volume", Options{Interval: time.Hour, MaxPendingBytes: 300}, 3, 3},
		{"time", Options{Interval: 20 * time.Millisecond}, 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, l := newMemTable(), newTestLedger(t)
			m.done = make(chan int, 10)
			c := newTestCommitter(t, m, l, tt.o)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); <-done }()
			c.Assigned(tp0(), l.id)
			for i := range int64(tt.files) {
				c.Published(tp0(), l.add(t, [2]int64{i, i + 1}))
			}
			select {
			case <-m.done:
			case <-time.After(time.Minute):
				t.Fatalf("no commit within a minute")
			}
			if n := len(m.locations()); n != tt.wantMore {
				t.Errorf("the commit holds %d files, want %d", n, tt.wantMore)
			}
		})
	}
}

// TestVolumeWaitsBelowTheMark: below MaxPendingBytes and before the
// interval, nothing is committed, however long the loop runs: the file
// waits for Close.
func TestVolumeWaitsBelowTheMark(t *testing.T) {
	t.Parallel()
	m, l := newMemTable(), newTestLedger(t)
	c := newTestCommitter(t, m, l, Options{Interval: time.Hour, MaxPendingBytes: 300})
	c.Assigned(tp0(), l.id)
	c.Published(tp0(), l.add(t, [2]int64{0, 1}))
	c.Published(tp0(), l.add(t, [2]int64{1, 2}))
	if err := c.step(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if n := len(m.locations()); n != 0 {
		t.Errorf("%d files committed below the mark", n)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(m.locations()); n != 2 {
		t.Errorf("the last commit holds %d files, want 2", n)
	}
}

// TestFailedCommits: a commit that fails for a reason that may pass is
// retried, and lands once; one that can't stops the loop with the error.
func TestFailedCommits(t *testing.T) {
	t.Parallel()
	t.Run("retried", func(t *testing.T) {
		t.Parallel()
		m, l := newMemTable(), newTestLedger(t)
		m.fail = func(n int) (error, bool) {
			if n <= 2 {
				return errors.New("commit conflict, retries exhausted"), false
			}
			return nil, false
		}
		m.done = make(chan int, 10)
		c := newTestCommitter(t, m, l, Options{MaxPendingBytes: 1})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		c.Assigned(tp0(), l.id)
		e := l.add(t, [2]int64{0, 1})
		c.Published(tp0(), e)
		<-m.done
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := m.locations(); !slices.Equal(got, keys(e)) {
			t.Errorf("table holds %v", got)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		t.Parallel()
		m, l := newMemTable(), newTestLedger(t)
		denied := fmt.Errorf("catalog: 403 Forbidden: %w", ErrPermanent)
		m.fail = func(int) (error, bool) { return denied, false }
		c := newTestCommitter(t, m, l, Options{MaxPendingBytes: 1})
		c.Assigned(tp0(), l.id)
		c.Published(tp0(), l.add(t, [2]int64{0, 1}))
		if err := c.Run(context.Background()); !errors.Is(err, denied) {
			t.Fatalf("Run = %v, want the denial", err)
		}
		if !errors.Is(c.Err(), denied) {
			t.Errorf("Err = %v", c.Err())
		}
	})
}

// TestWrongLocationRefused: a catalog that puts the table where Spillway
// does not write its files stops the run, naming the keys.
func TestWrongLocationRefused(t *testing.T) {
	t.Parallel()
	m, l := newMemTable(), newTestLedger(t)
	c := newTestCommitter(t, m, l, Options{Location: func(name string) string { return "mem://out/" + name }})
	c.Assigned(tp0(), l.id)
	err := c.Close(context.Background())
	if !errors.Is(err, ErrPermanent) {
		t.Fatalf("Close = %v, want a permanent error", err)
	}
	t.Log(err)
}

// TestDroppedFilesStillCommitted: a graceful stop revokes every partition
// (the sink stored their files first) before the last commit, which still
// holds their files. A partition dropped before its catch-up ran is
// caught up then, to its own last file and not past it: a CI rehearsal
// found a drain whose last snapshot lacked a partition's last file, its
// catch-up not run when the stop came.
func TestDroppedFilesStillCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, l := newMemTable(), newTestLedger(t)
	c := newTestCommitter(t, m, l, Options{})
	c.Assigned(tp0(), l.id)
	if err := c.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	e := l.add(t, [2]int64{0, 10})
	c.Published(tp0(), e)
	c.Dropped(map[offsets.TopicPartition]bool{tp0(): true})
	e1 := l.add(t, [2]int64{10, 20})
	c.Published(tp0(), e1) // no longer owned: not queued
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.locations(); !slices.Equal(got, keys(e)) {
		t.Errorf("table holds %v, want %v", got, keys(e))
	}

	// The table lacks e and the entry after it; this run publishes a
	// third, then loses the partition before its catch-up runs, and the
	// new owner appends a fourth.
	m2 := newMemTable()
	c2 := newTestCommitter(t, m2, l, Options{})
	c2.Assigned(tp0(), l.id)
	mine := l.add(t, [2]int64{20, 30})
	c2.Published(tp0(), mine)
	c2.Dropped(map[offsets.TopicPartition]bool{tp0(): true})
	l.add(t, [2]int64{30, 40})
	if err := c2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all, _ := l.l.Last(ctx, l.id)
	if got, want := m2.locations(), keys(e, e1, mine); !slices.Equal(got, want) {
		t.Errorf("a partition dropped before its catch-up: table holds %v, want %v (up to its own last file, entry %d of %d)", got, want, mine.Seq, all.Seq)
	}
}

// TestTwoTopicsOneTableRefused: topics a.b and a_b, both table kafka.a_b
// (a topic's dots become "_"), as kafka.topic_regex may find them, are
// refused with a permanent error naming both, not mixed in one table.
func TestTwoTopicsOneTableRefused(t *testing.T) {
	t.Parallel()
	m, l := newMemTable(), newTestLedger(t)
	c := newTestCommitter(t, m, l, Options{})
	for _, topic := range []string{"a.b", "a_b"} {
		c.Assigned(offsets.TopicPartition{Topic: topic}, ledger.Identity{Cluster: "c", Topic: topic, TopicID: "id-" + topic})
	}
	err := c.Close(context.Background())
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "topics a.b and a_b are both table kafka.a_b") {
		t.Fatalf("Close = %v, want a permanent error naming a.b and a_b", err)
	}
}
