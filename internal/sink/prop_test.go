package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/verify"
)

// TestPropCommitAndRecovery is the property test of the promises "no loss"
// and "no duplicates" (docs/design.md, promises 2 and 3). It drives a real Sink
// over a real file:// bucket, the backend with create-only publication,
// through random interleavings of what a consumer group does to it:
// records arriving (some of them tombstones, which null_values: ignore
// skips), files rotating, uploads completing or failing in any
// order, offset commits, crashes (SIGKILL: whatever is not yet stored is
// gone), revokes and lost partitions, and partitions coming back.
//
// The test plays the source's part (internal/source) by hand: it feeds
// records in offset order from the resume point, commits what Committable
// returns, flushes, commits and drops on revoke, drops on lost, and resumes
// an assigned partition from max(committed, verify.NextOffset), moving the
// group's offset forward to it as onAssigned does.
//
// After every action:
//   - the committed offset of every partition is at most the end of the
//     gap-free run of offsets that storage holds from offset 0, tombstones
//     counting as held (nothing is committed that a crash could lose),
//   - no offset is stored twice, and every stored record is the right one,
//   - a commit never moves an offset backwards, nor happens for a
//     partition this instance does not own.
//
// At the end every partition is assigned, everything is fed, flushed,
// uploaded and committed (restarting if the sink died), and then every
// offset of every partition must be stored exactly once (tombstones never)
// and committed.
//
// Each upload's commit waits at storage.Faults.BeforeCommit until the test
// completes or fails it, so the order in which files become durable is the
// test's choice, not the scheduler's.
func TestPropCommitAndRecovery(t *testing.T) {
	root := t.TempDir()
	cfg := baseConfig(t)
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(root, "run")
		if err != nil {
			rt.Fatal(err)
		}
		m := &propModel{
			cfg:        cfg,
			dir:        dir,
			parts:      rapid.IntRange(1, 3).Draw(rt, "partitions"),
			maxRecords: rapid.IntRange(1, 4).Draw(rt, "maxRecords"),
			keys:       map[string][]int64{},
		}
		m.logEnd = make([]int64, m.parts)
		m.tombstones = make([]map[int64]bool, m.parts)
		for p := range m.tombstones {
			m.tombstones[p] = map[int64]bool{}
		}
		m.fed = make([]int64, m.parts)
		m.committed = make([]int64, m.parts)
		m.assigned = make([]bool, m.parts)
		// Cleanup runs even when a check fails: no goroutine may outlive
		// the run (goleak checks at the end), and runs must not share
		// files.
		rt.Cleanup(func() {
			m.closeGeneration(true)
			_ = os.RemoveAll(dir)
		})
		m.start(rt, "start")
		rt.Repeat(rapid.StateMachineActions(m))
		m.drain(rt)
	})
}

const (
	propTopic = "t"
	// propMaxLog bounds the records of one run, so that a run stays fast
	// under -race and a counterexample stays readable.
	propMaxLog = 40
)

var errKilled = errors.New("process killed before the upload completed")

// propModel is the consumer group and the log, as the test tracks them, and
// the sink of the current process ("generation").
type propModel struct {
	cfg        sink.Config
	dir        string
	parts      int
	maxRecords int

	logEnd []int64 // records produced to each partition
	// tombstones are records with a null value, which null_values: ignore
	// skips: never stored, yet their offsets are committed like the rest.
	tombstones []map[int64]bool
	fed        []int64 // next offset the source feeds, while assigned
	committed  []int64 // the group's committed offset (0: none, start earliest)
	assigned   []bool

	gen  *generation
	gens int

	// keys caches the offsets of each stored object: objects are written
	// create-only and never change once visible.
	keys map[string][]int64
}

// generation is one process: its bucket, its sink and the gate its
// uploads' commits wait at.
type generation struct {
	bucket *storage.Bucket
	s      *sink.Sink
	gate   *commitGate
}

// ---- the gate every upload's commit passes ----

type commitGate struct {
	mu      sync.Mutex
	dead    bool              // the process was killed: no commit ever completes
	approve func(string) bool // commits that go through without waiting
	waiting []*heldCommit
}

type heldCommit struct {
	key  string
	p    int32
	off  int64
	done chan error
}

func (g *commitGate) beforeCommit(tmplMatch func(string) (int32, int64), key string) error {
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		return errKilled
	}
	if g.approve != nil && g.approve(key) {
		g.mu.Unlock()
		return nil
	}
	p, off := tmplMatch(key)
	h := &heldCommit{key: key, p: p, off: off, done: make(chan error, 1)}
	g.waiting = append(g.waiting, h)
	// Sorted, so that a drawn index names the same upload whatever the
	// order in which the upload goroutines got here.
	sort.SliceStable(g.waiting, func(i, j int) bool {
		a, b := g.waiting[i], g.waiting[j]
		if a.p != b.p {
			return a.p < b.p
		}
		return a.off < b.off
	})
	g.mu.Unlock()
	return <-h.done
}

// held returns the keys of the commits waiting for a decision, in order.
func (g *commitGate) held() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, len(g.waiting))
	for i, h := range g.waiting {
		out[i] = h.key
	}
	return out
}

// decide lets the i-th waiting commit go on (err nil) or fail.
func (g *commitGate) decide(i int, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.waiting[i]
	g.waiting = slices.Delete(g.waiting, i, i+1)
	h.done <- err
}

// setApprove lets every commit whose key approve accepts go on, those
// waiting and those to come, until it is changed again.
func (g *commitGate) setApprove(approve func(string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.approve = approve
	if approve == nil {
		return
	}
	g.waiting = slices.DeleteFunc(g.waiting, func(h *heldCommit) bool {
		if approve(h.key) {
			h.done <- nil
			return true
		}
		return false
	})
}

// kill fails every commit, waiting or to come.
func (g *commitGate) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dead = true
	for _, h := range g.waiting {
		h.done <- errKilled
	}
	g.waiting = nil
}

// ---- processes ----

// match returns the partition and start offset in an object key.
func (m *propModel) match(key string) (int32, int64) {
	v, ok := m.cfg.Template.Match(strings.TrimSuffix(key, m.cfg.Extension))
	if !ok {
		return -1, -1
	}
	return v.Partition, v.StartOffset
}

// start begins a process: a fresh bucket, sink and gate, with every
// partition assigned to it, each resumed from storage.
func (m *propModel) start(rt *rapid.T, why string) {
	m.gens++
	g := &commitGate{}
	faults := &storage.Faults{BeforeCommit: func(key string) error { return g.beforeCommit(m.match, key) }}
	// Enough upload slots that a held commit never keeps another file's
	// parts from reaching storage: the order of commits is the test's.
	bucket, err := storage.Open(context.Background(), "file://"+m.dir, storage.Options{PartSize: 64 << 10, UploadConcurrency: 1024, Faults: faults})
	if err != nil {
		rt.Fatal(err)
	}
	cfg := m.cfg
	cfg.MaxRecords = int64(m.maxRecords)
	cfg.MaxAge = time.Hour // only Tick, called by the test, closes files by age
	cfg.NullValues = "ignore"
	m.gen = &generation{bucket: bucket, gate: g,
		s: sink.New(cfg, bucket, budget.New(1<<30, 0), slog.New(slog.DiscardHandler))}
	rt.Logf("process %d starts (%s)", m.gens, why)
	for p := range m.parts {
		m.assigned[p] = false
		m.assign(rt, p)
	}
}

// closeGeneration ends the current process. killed: as by SIGKILL, no
// commit still in flight completes.
func (m *propModel) closeGeneration(killed bool) {
	if m.gen == nil {
		return
	}
	if killed {
		m.gen.gate.kill()
	} else {
		m.gen.gate.setApprove(func(string) bool { return true })
	}
	m.gen.s.Close()
	_ = m.gen.bucket.Close()
	m.gen = nil
}

// assign resumes partition p as the source's onAssigned does: from
// max(committed, one past the last stored offset), moving the group's
// offset forward to it.
func (m *propModel) assign(rt *rapid.T, p int) {
	next, ok, err := verify.NextOffset(context.Background(), m.gen.bucket, m.cfg.Template, "", propTopic, int32(p))
	if err != nil {
		rt.Fatalf("NextOffset(t/%d): %v", p, err)
	}
	if ok && next > m.committed[p] {
		rt.Logf("  t/%d: storage ends at %d, ahead of the commit %d: commit %d", p, next, m.committed[p], next)
		m.committed[p] = next
	}
	m.fed[p] = m.committed[p]
	m.assigned[p] = true
	rt.Logf("  t/%d assigned, consuming from %d", p, m.fed[p])
}

// settle waits until the sink and storage can go no further without the
// test: every goroutine but this one is blocked, on a channel, a lock or a
// condition (an upload waiting for the test's decision, a later file of a
// partition waiting for an earlier one, idle part queues).
//
// Waiting for exactly that, rather than for a count of uploads or for a
// quiet while, is what makes a run replayable: what an upload does after
// its commit (mark the file durable, let the partition's next file go)
// would otherwise race with the test's next action, and a failure that
// depends on such a race can't be replayed, so rapid can't shrink it.
func (m *propModel) settle(rt *rapid.T) {
	deadline := time.Now().Add(20 * time.Second)
	// Each look stops the world: look often at first, then back off, so
	// that the looking does not slow down what it waits for.
	pause := 20 * time.Microsecond
	var buf []byte
	for {
		busy := busyGoroutinesIn(&buf)
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("the sink never settled; still busy:\n%s", busy)
		}
		time.Sleep(pause)
		pause = min(2*pause, 500*time.Microsecond)
	}
}

// blockedStates are the goroutine states in which a goroutine waits for
// another one; anything else (running, runnable, in a system call) is work
// still going on. Plain "semacquire" is not one: it is the runtime's own
// wait, to start a garbage collection or to stop the world (as
// busyGoroutines itself does), and the goroutine goes on by itself.
var blockedStates = map[string]bool{
	"chan receive": true, "chan send": true, "select": true,
	"chan receive (nil chan)": true, "chan send (nil chan)": true, "select (no cases)": true,
	"sync.Cond.Wait": true, "sync.Mutex.Lock": true, "sync.RWMutex.Lock": true,
	"sync.RWMutex.RLock": true, "sync.WaitGroup.Wait": true,
}

// busyGoroutines returns the stacks of Spillway's goroutines, other than
// the caller, that are not blocked, or "" when there are none.
func busyGoroutines() string {
	var buf []byte
	return busyGoroutinesIn(&buf)
}

// busyGoroutinesIn is busyGoroutines taking the stacks into *buf, grown as
// needed and kept for the next call: settle looks thousands of times per
// run, and a fresh buffer each time keeps the garbage collector busy.
func busyGoroutinesIn(buf *[]byte) string {
	if len(*buf) == 0 {
		*buf = make([]byte, 64<<10)
	}
	var stacks []byte
	for {
		n := runtime.Stack(*buf, true)
		if n < len(*buf) {
			stacks = (*buf)[:n]
			break
		}
		*buf = make([]byte, 2*len(*buf))
	}
	var busy []string
	// The first stack is the caller's own.
	for i, g := range bytes.Split(stacks, []byte("\n\n")) {
		if i == 0 {
			continue
		}
		// "goroutine 7 [chan receive, 2 minutes]:"
		open, end := bytes.IndexByte(g, '['), bytes.IndexByte(g, ']')
		if open < 0 || end < open {
			continue
		}
		state, _, _ := bytes.Cut(g[open+1:end], []byte(","))
		// Only Spillway's goroutines count (a goroutine running on another
		// thread shows no stack: it may be one), so that a goroutine some
		// other test left sleeping does not hold this one up.
		ours := bytes.Contains(g, []byte("spillway/internal/")) || bytes.Contains(g, []byte("stack unavailable"))
		if !blockedStates[string(state)] && ours {
			busy = append(busy, string(g))
		}
	}
	return strings.Join(busy, "\n\n")
}

func (m *propModel) dead() bool { return m.gen.s.Err() != nil }

func (m *propModel) eligible(f func(p int) bool) []int {
	var out []int
	for p := range m.parts {
		if f(p) {
			out = append(out, p)
		}
	}
	return out
}

func tpOf(p int) sink.TopicPartition {
	return sink.TopicPartition{Topic: propTopic, Partition: int32(p)}
}

// commit records Committable's offsets as the group's, checking what the
// source relies on: only owned partitions, never backwards.
func (m *propModel) commit(rt *rapid.T, only map[sink.TopicPartition]bool) {
	offs := m.gen.s.Committable(only)
	for p := range m.parts {
		off, ok := offs[tpOf(p)]
		if !ok {
			continue
		}
		if !m.assigned[p] {
			rt.Fatalf("Committable returned %d for t/%d, which this process does not own", off, p)
		}
		if off < m.committed[p] {
			rt.Fatalf("Committable returned %d for t/%d, behind the group's commit %d", off, p, m.committed[p])
		}
		rt.Logf("  commit t/%d at %d", p, off)
		m.committed[p] = off
	}
}

// records returns the log's records [from, to) of partition p.
func (m *propModel) records(p int, from, to int64) []*kgo.Record {
	var out []*kgo.Record
	for off := from; off < to; off++ {
		if m.tombstones[p][off] {
			out = append(out, null(propTopic, int32(p), off))
		} else {
			out = append(out, rec(propTopic, int32(p), off))
		}
	}
	return out
}

// ---- actions ----

// Produce appends records to a partition's log.
func (m *propModel) Produce(rt *rapid.T) {
	total := int64(0)
	for _, n := range m.logEnd {
		total += n
	}
	if total >= propMaxLog {
		rt.Skip("log is full")
	}
	p := rapid.IntRange(0, m.parts-1).Draw(rt, "p")
	n := rapid.IntRange(1, 4).Draw(rt, "n")
	var nulls []int64
	for range n {
		// One in six is a tombstone; shrinking goes towards none.
		if rapid.IntRange(0, 5).Draw(rt, "tombstone") == 5 {
			m.tombstones[p][m.logEnd[p]] = true
			nulls = append(nulls, m.logEnd[p])
		}
		m.logEnd[p]++
	}
	rt.Logf("produce: t/%d log ends at %d (tombstones at %v)", p, m.logEnd[p], nulls)
}

// Poll feeds a partition's next records to the sink, in offset order, as
// a fetch would.
func (m *propModel) Poll(rt *rapid.T) {
	// Where a partition resumes depends on which uploads completed, so
	// draw from fixed ranges (see Upload) and fit the values to the state.
	k := rapid.IntRange(0, 7).Draw(rt, "p")
	n := rapid.Int64Range(1, 8).Draw(rt, "n")
	ps := m.eligible(func(p int) bool { return m.assigned[p] && m.fed[p] < m.logEnd[p] })
	if len(ps) == 0 {
		rt.Logf("nothing to poll")
		return
	}
	p := ps[k%len(ps)]
	n = min(n, m.logEnd[p]-m.fed[p])
	from := m.fed[p]
	if err := m.gen.s.Write(context.Background(), m.records(p, from, from+n)); err != nil {
		// An upload failed in the meantime: the process is stopping.
		rt.Logf("poll: t/%d [%d,%d): Write: %v", p, from, from+n, err)
		return
	}
	m.fed[p] = from + n
	rt.Logf("poll: t/%d [%d,%d) written", p, from, from+n)
	m.settle(rt)
}

// Rotate closes open files without waiting for their upload: one
// partition's (as a revoke's or shutdown's Flush would begin), or all of
// them (as max_age does).
func (m *propModel) Rotate(rt *rapid.T) {
	if rapid.Bool().Draw(rt, "all") {
		if err := m.gen.s.Tick(context.Background(), time.Now().Add(2*time.Hour)); err != nil {
			rt.Fatalf("Tick: %v", err)
		}
		rt.Logf("rotate: every open file closed")
	} else {
		p := rapid.IntRange(0, m.parts-1).Draw(rt, "p")
		// A cancelled context: Flush closes the files, then gives up
		// waiting for them.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = m.gen.s.Flush(ctx, map[sink.TopicPartition]bool{tpOf(p): true}, sink.ReasonAge)
		rt.Logf("rotate: t/%d's open file closed", p)
	}
	m.settle(rt)
}

// Upload completes, or fails, one of the uploads waiting to commit: any of
// them, in any order. Uploads are numbered by partition and offset.
func (m *propModel) Upload(rt *rapid.T) {
	// What the test draws never depends on what the goroutines did, only
	// on the model: a replay then makes the same choices, which keeps
	// shrinking reliable even when an upload goroutine runs late.
	n := rapid.IntRange(0, 63).Draw(rt, "upload")
	// One in eight fails; shrinking goes towards success.
	fail := rapid.IntRange(0, 7).Draw(rt, "fate") == 7
	held := m.gen.gate.held()
	if len(held) == 0 {
		rt.Logf("no upload is waiting")
		return
	}
	i := n % len(held)
	if fail {
		rt.Logf("upload %s fails", held[i])
		m.gen.gate.decide(i, errors.New("storage refused the upload"))
	} else {
		rt.Logf("upload %s completes", held[i])
		m.gen.gate.decide(i, nil)
	}
	m.settle(rt)
}

// Commit commits what the sink reports durable, as the commit loop does.
func (m *propModel) Commit(rt *rapid.T) {
	rt.Logf("commit")
	m.commit(rt, nil)
}

// Crash kills the process, as SIGKILL would, and starts a new one that
// resumes every partition from storage.
func (m *propModel) Crash(rt *rapid.T) {
	rt.Logf("crash")
	m.closeGeneration(true)
	m.start(rt, "after the crash")
}

// Revoke takes a partition away in a cooperative rebalance, as onRevoked
// does: flush its files and wait for them (or give up after the revoke
// timeout), commit what is durable, drop it.
func (m *propModel) Revoke(rt *rapid.T) {
	ps := m.eligible(func(p int) bool { return m.assigned[p] })
	if len(ps) == 0 {
		rt.Skip("nothing assigned")
	}
	p := rapid.SampledFrom(ps).Draw(rt, "p")
	timeout := rapid.IntRange(0, 3).Draw(rt, "timeout") == 3
	tps := map[sink.TopicPartition]bool{tpOf(p): true}
	if timeout {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := m.gen.s.Flush(ctx, tps, sink.ReasonRevoke)
		rt.Logf("revoke t/%d: the flush times out (%v)", p, err)
	} else {
		// Storage lets this partition's uploads through while the flush
		// waits for them.
		m.gen.gate.setApprove(func(key string) bool { q, _ := m.match(key); return q == int32(p) })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := m.gen.s.Flush(ctx, tps, sink.ReasonRevoke)
		cancel()
		m.gen.gate.setApprove(nil)
		if errors.Is(err, context.DeadlineExceeded) {
			rt.Fatalf("revoke t/%d: Flush did not finish with every upload of the partition let through", p)
		}
		rt.Logf("revoke t/%d: flushed (%v)", p, err)
	}
	m.commit(rt, tps)
	m.gen.s.Drop(tps)
	m.assigned[p] = false
	m.settle(rt)
}

// Lose drops a partition without committing, as onLost does: the session
// expired and another member may own it already.
func (m *propModel) Lose(rt *rapid.T) {
	ps := m.eligible(func(p int) bool { return m.assigned[p] })
	if len(ps) == 0 {
		rt.Skip("nothing assigned")
	}
	p := rapid.SampledFrom(ps).Draw(rt, "p")
	m.gen.s.Drop(map[sink.TopicPartition]bool{tpOf(p): true})
	m.assigned[p] = false
	rt.Logf("lost t/%d", p)
	m.settle(rt)
}

// Assign gives a partition back to this process, which resumes it from
// storage.
func (m *propModel) Assign(rt *rapid.T) {
	ps := m.eligible(func(p int) bool { return !m.assigned[p] })
	if len(ps) == 0 {
		rt.Skip("everything assigned")
	}
	p := rapid.SampledFrom(ps).Draw(rt, "p")
	rt.Logf("assign t/%d", p)
	m.assign(rt, p)
}

// ---- invariants ----

// Check runs after every action.
func (m *propModel) Check(rt *rapid.T) {
	stored := m.stored(rt)
	for p := range m.parts {
		if end := m.gapFree(p, stored[p]); m.committed[p] > end {
			rt.Fatalf("t/%d: committed %d, but storage holds only offsets [0,%d) without a gap, tombstones aside (stored: %s): a crash now loses records",
				p, m.committed[p], end, ranges(stored[p]))
		}
	}
}

// stored reads what storage holds: per partition, the object holding each
// offset. It fails on an offset stored twice or a record that isn't the
// log's.
func (m *propModel) stored(rt *rapid.T) []map[int64]string {
	out := make([]map[int64]string, m.parts)
	for p := range out {
		out[p] = map[int64]string{}
	}
	var keys []string
	err := m.gen.bucket.List(context.Background(), "", func(o storage.Object) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		rt.Fatal(err)
	}
	sort.Strings(keys)
	for _, key := range keys {
		offs, ok := m.keys[key]
		if !ok {
			offs = m.readObject(rt, key)
			m.keys[key] = offs
		}
		p, _ := m.match(key)
		for _, off := range offs {
			if other, dup := out[p][off]; dup {
				rt.Fatalf("t/%d: offset %d is stored twice, in %s and %s", p, off, other, key)
			}
			out[p][off] = key
		}
	}
	return out
}

// readObject returns the offsets an object holds, checking that they run
// from the start offset in its name with no gap but tombstones, and that
// each record is the log's record at that offset.
func (m *propModel) readObject(rt *rapid.T, key string) []int64 {
	p, start := m.match(key)
	if p < 0 || int(p) >= m.parts {
		rt.Fatalf("unexpected object %s", key)
	}
	r, err := m.gen.bucket.Read(context.Background(), key)
	if err != nil {
		rt.Fatal(err)
	}
	data, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		rt.Fatal(err)
	}
	var offs []int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			rt.Fatalf("%s: bad line %q: %v", key, sc.Text(), err)
		}
		var v string
		if err := json.Unmarshal(l.Value, &v); err != nil || v != value(propTopic, p, l.Offset) {
			rt.Fatalf("%s: offset %d holds %s, not the log's record", key, l.Offset, l.Value)
		}
		if l.Offset >= m.logEnd[p] || m.tombstones[p][l.Offset] {
			rt.Fatalf("%s: offset %d is past the log end %d or a tombstone", key, l.Offset, m.logEnd[p])
		}
		// A file starts at the offset in its name and holds every record
		// from there on but tombstones.
		next := start
		if len(offs) > 0 {
			next = offs[len(offs)-1] + 1
		}
		for o := next; o < l.Offset; o++ {
			if !m.tombstones[p][o] {
				rt.Fatalf("%s: record %d has offset %d, but the log's record %d is missing before it", key, len(offs), l.Offset, o)
			}
		}
		if l.Offset < next || (len(offs) == 0 && l.Offset != start) {
			rt.Fatalf("%s: record %d has offset %d, want %d", key, len(offs), l.Offset, next)
		}
		offs = append(offs, l.Offset)
	}
	if len(offs) == 0 {
		rt.Fatalf("%s is empty", key)
	}
	return offs
}

// gapFree is the end of the run of offsets from 0 that nothing can lose:
// stored, or tombstones of the log (nothing to store).
func (m *propModel) gapFree(p int, stored map[int64]string) int64 {
	n := int64(0)
	for {
		if _, ok := stored[n]; !ok && !(m.tombstones[p][n] && n < m.logEnd[p]) {
			return n
		}
		n++
	}
}

// ranges prints stored offsets as their objects' ranges, for messages.
func ranges(stored map[int64]string) string {
	offs := make([]int64, 0, len(stored))
	for o := range stored {
		offs = append(offs, o)
	}
	slices.Sort(offs)
	var parts []string
	for i := 0; i < len(offs); {
		j := i
		for j+1 < len(offs) && offs[j+1] == offs[j]+1 && stored[offs[j+1]] == stored[offs[i]] {
			j++
		}
		parts = append(parts, fmt.Sprintf("[%d,%d) in %s", offs[i], offs[j]+1, stored[offs[i]]))
		i = j + 1
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// drain ends a run: every partition assigned, every record fed, every file
// flushed and uploaded, everything committed; a process whose sink died is
// restarted, as an orchestrator would. Then every record must be stored
// exactly once and committed.
func (m *propModel) drain(rt *rapid.T) {
	rt.Logf("drain")
	all := func(string) bool { return true }
	for attempt := 1; ; attempt++ {
		if attempt > 3 {
			rt.Fatalf("could not drain in 3 processes")
		}
		if m.dead() {
			m.closeGeneration(true)
			m.start(rt, "the sink failed")
		}
		// Uploads left over from lost or revoked partitions finish before
		// those partitions are resumed, like a process that waited.
		m.gen.gate.setApprove(all)
		m.settle(rt)
		for p := range m.parts {
			if !m.assigned[p] {
				m.assign(rt, p)
			}
		}
		var batch []*kgo.Record
		for p := range m.parts {
			batch = append(batch, m.records(p, m.fed[p], m.logEnd[p])...)
			m.fed[p] = m.logEnd[p]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := m.gen.s.Write(ctx, batch)
		if err == nil {
			err = m.gen.s.Flush(ctx, nil, sink.ReasonShutdown)
		}
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			rt.Fatalf("drain: the flush did not finish with every upload let through")
		}
		m.commit(rt, nil)
		m.Check(rt)
		if err == nil {
			break
		}
		rt.Logf("drain: %v; restarting", err)
		m.closeGeneration(true)
		m.start(rt, "the drain failed")
	}
	stored := m.stored(rt)
	m.closeGeneration(false)
	for p := range m.parts {
		if end := m.gapFree(p, stored[p]); end != m.logEnd[p] || len(stored[p]) != int(m.logEnd[p])-len(m.tombstones[p]) {
			rt.Fatalf("t/%d: after the drain storage holds %s, want [0,%d) once, tombstones %v aside", p, ranges(stored[p]), m.logEnd[p], m.tombstones[p])
		}
		if m.committed[p] != m.logEnd[p] {
			rt.Fatalf("t/%d: after the drain the commit is %d, want %d", p, m.committed[p], m.logEnd[p])
		}
	}
	// Nothing half-written is left behind either.
	tmps, _ := filepath.Glob(filepath.Join(m.dir, ".spillway-tmp-*"))
	if len(tmps) > 0 {
		rt.Fatalf("temp files left: %v", tmps)
	}
}
