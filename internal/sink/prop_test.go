package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// TestPropCommitAndRecovery is the property test of the promises "no loss"
// and "no duplicates" (docs/design.md, promises 2 and 3, and the resume
// ledger). It drives a real Sink, with a real resume ledger, over a real
// file:// bucket, the backend with create-only publication, through random
// interleavings of what a consumer group does to it: records arriving (some
// of them tombstones, which null_values: ignore skips), files rotating,
// ledger entries and uploads completing or failing in any order, offset
// commits, crashes (SIGKILL: whatever is not yet stored is gone), graceful
// restarts, revokes and lost partitions, lost offset commits, and
// partitions coming back.
//
// Files are named by an event-time hour bucket, and each record's
// timestamp falls in one of a few hours at random, so a partition has
// several files open at once and its offsets are spread over them in any
// order: a file holds runs of offsets, not one, and what is stored above a
// gap is exactly what the ledger's before.above records.
//
// Publishing a file takes the ledger's two steps: its entry is written
// (create-only), then the file is published. Both are commits to storage,
// and each waits at storage.Faults.BeforeCommit until the test completes
// or fails it, so a crash can fall before the entry, between the entry and
// the publication, or between the publication and the offset commit; and
// the order in which files become durable is the test's choice, not the
// scheduler's.
//
// The test plays the source's part (internal/source) by hand: it feeds
// records in offset order from the resume point, commits what Committable
// returns, flushes, commits and drops on revoke, drops on lost, and on
// assignment resumes the way onAssigned does: ledger.Ledger.Resume, then
// the group's commit reconciled with the stored state, then Sink.Assign.
// Commits of a lost or revoked partition still waiting at storage complete
// or fail before this process resumes the partition again
// (TestPropLateZombiePublish lets them land after).
//
// After every action:
//   - the committed offset of every partition is at most the end of the
//     gap-free run of offsets that storage holds from offset 0, tombstones
//     counting as held (nothing is committed that a crash could lose),
//   - no offset is stored twice across all published files, and every
//     stored record is the log's, in a file of its hour,
//   - the state the ledger gives now, were the partition resumed, is what
//     storage holds: it claims no offset that storage does not hold
//     (tombstones aside), which a resume would skip, and misses none that
//     storage holds, which a resume would store again,
//   - a commit never moves an offset backwards within one ownership, nor
//     happens for a partition this instance does not own (a simulated lost
//     commit moves it back, by design; the owner then moves it forward).
//
// At the end every partition is assigned, everything is fed, flushed,
// uploaded and committed (restarting if the sink died), and then every
// offset of every partition must be stored exactly once (tombstones never)
// and committed; and a restart, with the group's commits kept or lost,
// must store nothing again and end committed at the log end.
func TestPropCommitAndRecovery(t *testing.T) { runProp(t, false) }

// TestPropLateZombiePublish is TestPropCommitAndRecovery where a partition
// lost and assigned again in the same process resumes while a commit of its
// previous ownership is still under way, as the source does: onLost drops
// the partition, but a ledger entry or a file already on its way to storage
// can't be called back, and onAssigned resumes from the ledger without
// waiting for it. A file published late, after the new ownership resumed
// from "entry k, whose file was not published", collides with the new
// owner's file of the same name; the new owner has written entry k+1 for its
// own version of that file, and from then on every resume fails: the last
// entry's file has another size.
func TestPropLateZombiePublish(t *testing.T) {
	runProp(t, true)
}

func runProp(t *testing.T, zombies bool) {
	root := t.TempDir()
	cfg := baseConfig(t)
	tmpl, err := naming.Parse(propTemplate)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Template = tmpl
	cfg.EventTime = true
	cfg.Writer = "prop"
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(root, "run")
		if err != nil {
			rt.Fatal(err)
		}
		m := &propModel{
			cfg:     cfg,
			dir:     dir,
			parts:   rapid.IntRange(1, 3).Draw(rt, "partitions"),
			keys:    map[string][]int64{},
			zombies: zombies,
		}
		m.logEnd = make([]int64, m.parts)
		m.tombstones = make([]map[int64]bool, m.parts)
		m.hours = make([]map[int64]int, m.parts)
		for p := range m.parts {
			m.tombstones[p] = map[int64]bool{}
			m.hours[p] = map[int64]int{}
		}
		m.fed = make([]int64, m.parts)
		m.committed = make([]int64, m.parts)
		m.history = make([][]int64, m.parts)
		m.owned = make([]int64, m.parts)
		m.checked = make([][2]int, m.parts)
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
	// propTemplate puts each record in the file of its event-time hour.
	propTemplate = "{{topic}}-{{partition}}-{{timestamp:unit=HH}}-{{start_offset}}"
	// propHours is how many hours record timestamps spread over.
	propHours = 3
	// propMaxLog bounds the records of one run, so that a run stays fast
	// under -race and a counterexample stays readable.
	propMaxLog = 40
	// propCluster and propTopicID are the log's identity in the ledger.
	propCluster = "prop-cluster"
	propTopicID = "prop-topic-id"
)

// propEpoch is the start of the first hour record timestamps fall in.
var propEpoch = time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)

var errKilled = errors.New("process killed before the upload completed")

// propModel is the consumer group and the log, as the test tracks them, and
// the sink of the current process ("generation").
type propModel struct {
	cfg   sink.Config
	dir   string
	parts int
	// zombies: a partition assigned again in the same process resumes
	// while commits of its previous ownership still wait at the gate, to
	// complete later. Without it they complete or fail first, as if the
	// process had waited for them.
	zombies bool

	logEnd []int64 // records produced to each partition
	// tombstones are records with a null value, which null_values: ignore
	// skips: never stored, yet their offsets are committed like the rest.
	tombstones []map[int64]bool
	hours      []map[int64]int // the hour, from propEpoch, of each record's timestamp
	fed        []int64         // next offset the source feeds, while assigned
	committed  []int64         // the group's committed offset (0: none, start earliest)
	history    [][]int64       // every offset the group committed, for lost commits
	// owned is the highest commit of the current ownership: commits never
	// go below it, even after a lost commit moved the group's back.
	owned    []int64
	assigned []bool

	gen  *generation
	gens int

	// keys caches the offsets of each stored object: objects are written
	// create-only and never change once visible.
	keys map[string][]int64
	// storage is what storage held at the last check; checked is, per
	// partition, the generation and the count of its gate's commits then.
	storage []map[int64]string
	checked [][2]int
}

// generation is one process: its bucket, its sink, its ledger and the gate
// its uploads' commits wait at.
type generation struct {
	bucket *storage.Bucket
	s      *sink.Sink
	ledger *ledger.Ledger
	gate   *commitGate
}

// ---- the gate every commit to storage passes ----

type commitGate struct {
	mu      sync.Mutex
	dead    bool              // the process was killed: no commit ever completes
	approve func(string) bool // commits that go through without waiting
	waiting []*heldCommit
	passed  map[int32]int // per partition, commits let through so far
}

type heldCommit struct {
	key  string
	p    int32
	done chan error
}

func (g *commitGate) beforeCommit(partition func(string) int32, key string) error {
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		return errKilled
	}
	if g.approve != nil && g.approve(key) {
		g.passed[partition(key)]++
		g.mu.Unlock()
		return nil
	}
	h := &heldCommit{key: key, p: partition(key), done: make(chan error, 1)}
	g.waiting = append(g.waiting, h)
	// Sorted, so that a drawn index names the same commit whatever the
	// order in which the upload goroutines got here.
	sort.SliceStable(g.waiting, func(i, j int) bool {
		a, b := g.waiting[i], g.waiting[j]
		if a.p != b.p {
			return a.p < b.p
		}
		return a.key < b.key
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
	if err == nil {
		g.passed[h.p]++
	}
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
			g.passed[h.p]++
			h.done <- nil
			return true
		}
		return false
	})
}

// changes counts the commits of partition p let through so far: storage
// holds nothing new of p while it stays the same.
func (g *commitGate) changes(p int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passed[int32(p)]
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

// ---- keys ----

// dataKey is what a data file's name says.
type dataKey struct {
	p     int32
	hour  int // from propEpoch
	start int64
}

// parseData reads a data file's key, "t-<partition>-<HH>-<start>.jsonl".
func (m *propModel) parseData(key string) (dataKey, bool) {
	name := strings.TrimSuffix(key, m.cfg.Extension)
	if _, ok := m.cfg.Template.Match(name); !ok || name == key {
		return dataKey{}, false
	}
	f := strings.Split(strings.TrimPrefix(name, propTopic+"-"), "-")
	if len(f) != 3 {
		return dataKey{}, false
	}
	p, err1 := strconv.Atoi(f[0])
	hh, err2 := strconv.Atoi(f[1])
	start, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return dataKey{}, false
	}
	return dataKey{p: int32(p), hour: hh - propEpoch.Hour(), start: start}, true
}

// ledgerDir is where the ledger of partition p lives.
func ledgerDir(p int32) string {
	return fmt.Sprintf("%sledger/%s/%s/%d/", ledger.StateDir, propTopic, propTopicID, p)
}

// keyPartition is the partition a data file or ledger entry belongs to, or
// -1.
func (m *propModel) keyPartition(key string) int32 {
	if d, ok := m.parseData(key); ok {
		return d.p
	}
	for p := range m.parts {
		if strings.HasPrefix(key, ledgerDir(int32(p))) {
			return int32(p)
		}
	}
	return -1
}

// describe names a commit for the log: which of the two steps it is.
func describe(key string) string {
	if strings.HasPrefix(key, ledger.StateDir) {
		return "ledger entry " + key
	}
	return "file " + key
}

// ---- processes ----

// start begins a process: a fresh bucket, sink, ledger and gate, with
// every partition assigned to it, each resumed from the ledger.
func (m *propModel) start(rt *rapid.T, why string) {
	m.gens++
	g := &commitGate{passed: map[int32]int{}}
	faults := &storage.Faults{BeforeCommit: func(key string) error { return g.beforeCommit(m.keyPartition, key) }}
	// Enough upload slots that a held commit never keeps another file's
	// parts from reaching storage: the order of commits is the test's.
	bucket, err := storage.Open(context.Background(), "file://"+m.dir, storage.Options{PartSize: 64 << 10, UploadConcurrency: 1024, Faults: faults})
	if err != nil {
		rt.Fatal(err)
	}
	ledger := ledger.New(bucket, "")
	cfg := m.cfg
	cfg.Ledger = ledger
	// Each process draws its file sizes, as a restart with another
	// file.max_records would: runs stored above a gap by one process are
	// then often met by another that closes a file before reaching them.
	cfg.MaxRecords = int64(rapid.IntRange(1, 4).Draw(rt, "maxRecords"))
	// Few open files at most makes the sink close the least recently used
	// one to open another, on top of the rotations the test asks for.
	cfg.MaxOpenFiles = rapid.SampledFrom([]int{100, 2, 3}).Draw(rt, "maxOpenFiles")
	cfg.MaxAge = time.Hour // only Tick, called by the test, closes files by age
	cfg.NullValues = "ignore"
	m.gen = &generation{bucket: bucket, gate: g, ledger: ledger,
		s: sink.New(cfg, sink.FromStorage(bucket), budget.New(1<<30, 0), slog.New(slog.DiscardHandler))}
	rt.Logf("process %d starts (%s): max_records %d, max_open_files %d", m.gens, why, cfg.MaxRecords, cfg.MaxOpenFiles)
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

func identity(p int) ledger.Identity {
	return ledger.Identity{Cluster: propCluster, Topic: propTopic, TopicID: propTopicID, Partition: int32(p)}
}

// resume asks the ledger where partition p stands, as the runner's
// resumer does for a prefix that has a ledger.
func (m *propModel) resume(p int) (ledger.Point, error) {
	return m.gen.ledger.Resume(context.Background(), identity(p), ledger.Log{Start: 0, End: m.logEnd[p]}, ledger.ResumeOptions{})
}

// assign resumes partition p as the source's onAssigned does: from the
// ledger's state, reconciled with the group's commit, moving the commit
// forward to where storage ends when storage is ahead.
func (m *propModel) assign(rt *rapid.T, p int) {
	pt, err := m.resume(p)
	if err != nil {
		rt.Fatalf("resume t/%d: %v", p, err)
	}
	at := m.committed[p]
	switch {
	case !pt.Found:
		pt.State = offsets.State{Next: at}
	case at > pt.State.Next:
		// Past a tail of records handled without a file (tombstones).
		pt.State = offsets.State{Next: at, Above: pt.State.Above.From(at)}
	case pt.State.Next > at:
		rt.Logf("  t/%d: storage ends at %d, ahead of the commit %d: commit %d", p, pt.State.Next, at, pt.State.Next)
		m.committed[p] = pt.State.Next
		m.history[p] = append(m.history[p], pt.State.Next)
	}
	m.gen.s.Assign(tpOf(p), identity(p), pt)
	m.fed[p] = pt.State.Next
	m.owned[p] = m.committed[p]
	m.assigned[p] = true
	rt.Logf("  t/%d assigned (%s, entry %d next), consuming from %d, skipping %v", p, pt.From, pt.Seq, m.fed[p], pt.State.Above)
}

// settle waits until the sink and storage can go no further without the
// test: every goroutine but this one is blocked, on a channel, a lock or a
// condition (a commit waiting for the test's decision, a later file of a
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

// workingStates are the states of a goroutine doing work, or about to.
var workingStates = map[string]bool{"running": true, "runnable": true}

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
		// A goroutine that runs or may run is work going on, whoever
		// started it: one that a library started for Spillway (errgroup's,
		// made to fsync directories at once) shows only the library's
		// frames until it first runs. Otherwise only Spillway's count (a
		// goroutine running on another thread shows no stack: it may be
		// one), so that a goroutine some other test left sleeping, or
		// os/signal's, which shows as in a system call for good, does not
		// hold this one up.
		ours := bytes.Contains(g, []byte("spillway/internal/")) || bytes.Contains(g, []byte("stack unavailable"))
		if workingStates[string(state)] || !blockedStates[string(state)] && ours {
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

func tpOf(p int) offsets.TopicPartition {
	return offsets.TopicPartition{Topic: propTopic, Partition: int32(p)}
}

// commit records Committable's offsets as the group's, checking what the
// source relies on: only owned partitions, never backwards within one
// ownership.
func (m *propModel) commit(rt *rapid.T, only map[offsets.TopicPartition]bool) {
	offs := m.gen.s.Committable(only)
	for p := range m.parts {
		off, ok := offs[tpOf(p)]
		if !ok {
			continue
		}
		if !m.assigned[p] {
			rt.Fatalf("Committable returned %d for t/%d, which this process does not own", off, p)
		}
		if off < m.committed[p] || off < m.owned[p] {
			rt.Fatalf("Committable returned %d for t/%d, behind the group's commit %d or this ownership's %d", off, p, m.committed[p], m.owned[p])
		}
		rt.Logf("  commit t/%d at %d", p, off)
		m.committed[p], m.owned[p] = off, off
		m.history[p] = append(m.history[p], off)
	}
}

// record is the log's record at offset off of partition p.
func (m *propModel) record(p int, off int64) *kgo.Record {
	r := rec(propTopic, int32(p), off)
	if m.tombstones[p][off] {
		r = null(propTopic, int32(p), off)
	}
	r.Timestamp = propEpoch.Add(time.Duration(m.hours[p][off])*time.Hour + time.Duration(off)*time.Millisecond)
	return r
}

// records returns the log's records [from, to) of partition p.
func (m *propModel) records(p int, from, to int64) []*kgo.Record {
	var out []*kgo.Record
	for off := from; off < to; off++ {
		out = append(out, m.record(p, off))
	}
	return out
}

// ---- actions ----

// Produce appends records to a partition's log, each with a timestamp in
// one of a few hours, in no order.
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
	var hours []int
	for range n {
		// One in six is a tombstone; shrinking goes towards none.
		if rapid.IntRange(0, 5).Draw(rt, "tombstone") == 5 {
			m.tombstones[p][m.logEnd[p]] = true
			nulls = append(nulls, m.logEnd[p])
		}
		// Shrinking goes towards one hour, one open file.
		h := rapid.IntRange(0, propHours-1).Draw(rt, "hour")
		m.hours[p][m.logEnd[p]] = h
		hours = append(hours, h)
		m.logEnd[p]++
	}
	rt.Logf("produce: t/%d log ends at %d (hours %v, tombstones at %v)", p, m.logEnd[p], hours, nulls)
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
	done, err := m.write(rt, context.Background(), m.records(p, from, from+n))
	m.fed[p] = from + int64(done)
	if err != nil {
		// An upload failed in the meantime: the process is stopping.
		rt.Logf("poll: t/%d [%d,%d): Write: %v", p, from, from+n, err)
		return
	}
	rt.Logf("poll: t/%d [%d,%d) written", p, from, from+n)
}

// write feeds records to the sink one at a time, and settles after each: a
// file that one record closes has its upload under way, and its ledger
// entry's state taken, before the next record is routed. What an entry
// says then depends on the records fed, not on how the upload goroutine
// and Write interleave, so a failure can be replayed.
func (m *propModel) write(rt *rapid.T, ctx context.Context, recs []*kgo.Record) (int, error) {
	for i, r := range recs {
		if err := m.gen.s.Write(ctx, []*kgo.Record{r}); err != nil {
			return i, err
		}
		m.settle(rt)
	}
	return len(recs), nil
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
		_ = m.gen.s.Flush(ctx, map[offsets.TopicPartition]bool{tpOf(p): true}, offsets.ReasonAge)
		rt.Logf("rotate: t/%d's open files closed", p)
	}
	m.settle(rt)
}

// Upload completes, or fails, one of the commits waiting at storage: a
// ledger entry or a data file, any of them, in any order. They are
// numbered by partition and key.
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
		rt.Logf("%s fails", describe(held[i]))
		m.gen.gate.decide(i, errors.New("storage refused the upload"))
	} else {
		rt.Logf("%s is stored", describe(held[i]))
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
// resumes every partition from the ledger. Whatever waits at the gate
// then, a ledger entry whose file is not published yet included, never
// completes.
func (m *propModel) Crash(rt *rapid.T) {
	rt.Logf("crash; waiting: %v", m.gen.gate.held())
	m.closeGeneration(true)
	m.start(rt, "after the crash")
}

// Restart stops the process gracefully, as on SIGTERM: every file is
// flushed with storage letting its commits through, what is durable is
// committed, and a new process resumes every partition. Records handled
// without a file (tombstones) after a partition's last file are then
// committed but in no ledger entry: the new process resumes from the
// commit, ahead of the ledger.
func (m *propModel) Restart(rt *rapid.T) {
	rt.Logf("graceful restart")
	m.gen.gate.setApprove(func(string) bool { return true })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err := m.gen.s.Flush(ctx, nil, offsets.ReasonShutdown)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		rt.Fatalf("restart: Flush did not finish with every upload let through")
	}
	rt.Logf("  flushed (%v)", err)
	m.settle(rt)
	m.commit(rt, nil)
	m.closeGeneration(false)
	m.start(rt, "after a graceful stop")
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
	tps := map[offsets.TopicPartition]bool{tpOf(p): true}
	if timeout {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := m.gen.s.Flush(ctx, tps, offsets.ReasonRevoke)
		rt.Logf("revoke t/%d: the flush times out (%v)", p, err)
	} else {
		// Storage lets this partition's entries and files through while
		// the flush waits for them.
		m.gen.gate.setApprove(func(key string) bool { return m.keyPartition(key) == int32(p) })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := m.gen.s.Flush(ctx, tps, offsets.ReasonRevoke)
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
	m.gen.s.Drop(map[offsets.TopicPartition]bool{tpOf(p): true})
	m.assigned[p] = false
	rt.Logf("lost t/%d", p)
	m.settle(rt)
}

// LoseCommit moves a partition's committed offset back, to none or to one
// it had earlier, as a commit lost by Kafka (an unclean leader election of
// __consumer_offsets) would; then a rebalance takes the partition away
// without a commit and gives it back, or, if this process does not own it,
// the next Assign does, so that it resumes from that commit and the
// ledger. (An owner that kept it would not commit again until it stored
// more, which is no loss: the group's commit is behind storage until the
// next resume moves it forward.)
func (m *propModel) LoseCommit(rt *rapid.T) {
	p := rapid.IntRange(0, m.parts-1).Draw(rt, "p")
	k := rapid.IntRange(0, 7).Draw(rt, "commit")
	to := int64(0)
	if h := m.history[p]; k > 0 && len(h) > 0 {
		to = min(h[(k-1)%len(h)], m.committed[p])
	}
	rt.Logf("t/%d: the commit %d is lost, the group's commit is %d", p, m.committed[p], to)
	m.committed[p] = to
	if m.assigned[p] {
		m.gen.s.Drop(map[offsets.TopicPartition]bool{tpOf(p): true})
		m.assigned[p] = false
		rt.Logf("  t/%d lost and assigned again", p)
		m.settle(rt)
		m.leftovers(rt, p)
		m.assign(rt, p)
	}
}

// Assign gives a partition back to this process, which resumes it from
// the ledger.
func (m *propModel) Assign(rt *rapid.T) {
	ps := m.eligible(func(p int) bool { return !m.assigned[p] })
	if len(ps) == 0 {
		rt.Skip("everything assigned")
	}
	p := rapid.SampledFrom(ps).Draw(rt, "p")
	rt.Logf("assign t/%d", p)
	m.leftovers(rt, p)
	m.assign(rt, p)
}

// leftovers completes or fails, each as drawn, the commits of partition p
// that still wait at the gate from a previous ownership, unless the model
// lets them complete after the partition resumed (zombies).
func (m *propModel) leftovers(rt *rapid.T, p int) {
	if m.zombies {
		return
	}
	for {
		i := slices.IndexFunc(m.gen.gate.held(), func(key string) bool { return m.keyPartition(key) == int32(p) })
		if i < 0 {
			return
		}
		key := m.gen.gate.held()[i]
		if rapid.Bool().Draw(rt, "leftover stored") {
			rt.Logf("  left over: %s is stored", describe(key))
			m.gen.gate.decide(i, nil)
		} else {
			rt.Logf("  left over: %s fails", describe(key))
			m.gen.gate.decide(i, errors.New("storage refused the upload"))
		}
		m.settle(rt)
	}
}

// ---- invariants ----

// Check runs after every action.
func (m *propModel) Check(rt *rapid.T) {
	// Storage changes only by a commit the gate lets through: read it
	// again, and resume from it again, only then.
	var changed []int
	for p := range m.parts {
		if at := [2]int{m.gens, m.gen.gate.changes(p)}; m.storage == nil || at != m.checked[p] {
			m.checked[p] = at
			changed = append(changed, p)
		}
	}
	if len(changed) > 0 {
		m.storage = m.stored(rt)
	}
	for _, p := range changed {
		m.checkLedger(rt, p, m.storage[p])
	}
	for p := range m.parts {
		if end := m.gapFree(p, m.storage[p]); m.committed[p] > end {
			rt.Fatalf("t/%d: committed %d, but storage holds only offsets [0,%d) without a gap, tombstones aside (stored: %s): a crash now loses records",
				p, m.committed[p], end, ranges(m.storage[p]))
		}
	}
}

// checkLedger checks the state each partition would resume from now
// against what storage holds: every offset the ledger says is handled, and
// a resume would skip, is stored or a tombstone; and every stored offset is
// one the ledger says is handled, or a resume would store it again. (A file
// a zombie publishes after the partition resumed is one the ledger can't
// know of: then only the first holds.)
func (m *propModel) checkLedger(rt *rapid.T, p int, stored map[int64]string) {
	pt, err := m.resume(p)
	if err != nil {
		rt.Fatalf("t/%d: the ledger can't be resumed from now: %v (stored: %s)", p, err, ranges(stored))
	}
	if !pt.Found {
		pt.State = offsets.State{}
	}
	for off := range max(pt.State.End(), m.logEnd[p]) {
		_, ok := stored[off]
		switch {
		case pt.State.Handled(off) && !ok && !m.tombstones[p][off]:
			rt.Fatalf("t/%d: the ledger (%s) says %d is handled, below %d or in %v, but storage does not hold it (stored: %s): a crash now loses it",
				p, pt.From, off, pt.State.Next, pt.State.Above, ranges(stored))
		case ok && !pt.State.Handled(off) && !m.zombies:
			rt.Fatalf("t/%d: storage holds %d, but the ledger (%s) says only [0,%d) and %v are handled (stored: %s): a crash now stores it again",
				p, off, pt.From, pt.State.Next, pt.State.Above, ranges(stored))
		}
	}
}

// stored reads what storage holds: per partition, the data file holding
// each offset. It fails on an offset stored twice or a record that isn't
// the log's.
func (m *propModel) stored(rt *rapid.T) []map[int64]string {
	out := make([]map[int64]string, m.parts)
	for p := range out {
		out[p] = map[int64]string{}
	}
	var keys []string
	// Data files are at the top level (the template has no "/"); the
	// ledger is below it.
	err := m.gen.bucket.ListDir(context.Background(), "", func(o storage.Object) error {
		if !o.Dir {
			keys = append(keys, o.Key)
		}
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
		p := m.keyPartition(key)
		for _, off := range offs {
			if other, dup := out[p][off]; dup {
				rt.Fatalf("t/%d: offset %d is stored twice, in %s and %s", p, off, other, key)
			}
			out[p][off] = key
		}
	}
	return out
}

// readObject returns the offsets a data file holds, checking that they
// increase from the start offset in its name, and that each record is the
// log's record at that offset, of the hour in the name.
func (m *propModel) readObject(rt *rapid.T, key string) []int64 {
	d, ok := m.parseData(key)
	if !ok || int(d.p) >= m.parts {
		rt.Fatalf("unexpected object %s", key)
	}
	p := int(d.p)
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
		if err := json.Unmarshal(l.Value, &v); err != nil || v != value(propTopic, d.p, l.Offset) {
			rt.Fatalf("%s: offset %d holds %s, not the log's record", key, l.Offset, l.Value)
		}
		if l.Offset >= m.logEnd[p] || m.tombstones[p][l.Offset] {
			rt.Fatalf("%s: offset %d is past the log end %d or a tombstone", key, l.Offset, m.logEnd[p])
		}
		if h := m.hours[p][l.Offset]; h != d.hour {
			rt.Fatalf("%s: offset %d is of hour %d, not the file's %d", key, l.Offset, h, d.hour)
		}
		if len(offs) == 0 && l.Offset != d.start || len(offs) > 0 && l.Offset <= offs[len(offs)-1] {
			rt.Fatalf("%s: record %d has offset %d, after %v (the name says it starts at %d)", key, len(offs), l.Offset, offs, d.start)
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

// ranges prints stored offsets as their objects' runs, for messages.
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
		m.gen.gate.setApprove(nil)
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
		_, err := m.write(rt, ctx, batch)
		if err == nil {
			// Close every file; its commits wait at the gate.
			closing, stop := context.WithCancel(ctx)
			stop()
			_ = m.gen.s.Flush(closing, nil, offsets.ReasonShutdown)
			m.settle(rt)
			// Let them through one at a time, checking storage and the
			// ledger after each: the drain is where a resume with runs
			// stored above a gap is most often followed by new files.
			for len(m.gen.gate.held()) > 0 {
				m.gen.gate.decide(0, nil)
				m.settle(rt)
				m.Check(rt)
			}
			err = m.gen.s.Flush(ctx, nil, offsets.ReasonShutdown)
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
	// Nothing half-written is left behind either, data file or ledger
	// entry.
	var tmps []string
	_ = filepath.WalkDir(m.dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".spillway-tmp-") {
			tmps = append(tmps, path)
		}
		return nil
	})
	if len(tmps) > 0 {
		rt.Fatalf("temp files left: %v", tmps)
	}
	// A restart now stores nothing again and ends committed at the log
	// end, with the group's commits as they are (past tombstones the
	// ledger can't know of) or lost.
	for _, lost := range []bool{false, true} {
		why := "a restart after the drain"
		if lost {
			why += ", every commit lost"
			clear(m.committed)
		}
		m.start(rt, why)
		m.gen.gate.setApprove(func(string) bool { return true })
		for p := range m.parts {
			if _, err := m.write(rt, context.Background(), m.records(p, m.fed[p], m.logEnd[p])); err != nil {
				rt.Fatalf("%s: t/%d: Write: %v", why, p, err)
			}
			m.fed[p] = m.logEnd[p]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := m.gen.s.Flush(ctx, nil, offsets.ReasonShutdown)
		cancel()
		if err != nil {
			rt.Fatalf("%s: Flush: %v", why, err)
		}
		m.commit(rt, nil)
		for p := range m.parts {
			if n := m.gen.gate.changes(p); n > 0 {
				rt.Fatalf("%s: t/%d: %d objects stored again", why, p, n)
			}
			if m.committed[p] != m.logEnd[p] {
				rt.Fatalf("%s: t/%d: the commit is %d, want %d", why, p, m.committed[p], m.logEnd[p])
			}
		}
		m.closeGeneration(false)
	}
}
