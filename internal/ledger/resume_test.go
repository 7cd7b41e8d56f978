package ledger_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
)

// bigLog is a log end past anything these tests store.
var bigLog = ledger.Log{Start: 0, End: 1 << 40}

func wantPoint(t *testing.T, p ledger.Point, found bool, next int64, above offsets.Ranges, seq int64) {
	t.Helper()
	if p.Found != found || p.State.Next != next || !slices.Equal(p.State.Above, above) || p.Seq != seq {
		t.Fatalf("Resume = %+v, want found %v, next %d, above %v, seq %d", p, found, next, above, seq)
	}
}

// noLegacy fails the test if Resume asks for files without a ledger.
func noLegacy(t *testing.T) ledger.ResumeOptions {
	return ledger.ResumeOptions{Legacy: func(context.Context, string, int32) (int64, bool, error) {
		t.Error("Legacy called for a partition with a ledger")
		return 0, false, nil
	}}
}

func TestResumeNothingStored(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	p, err := l.Resume(ctx, idA, ledger.Log{Start: 0, End: 0}, ledger.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, false, 0, nil, 0)
	if p.From == "" {
		t.Fatal("Point.From is empty")
	}
}

func TestResumeLastFilePublished(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	for seq := int64(0); seq < 3; seq++ {
		e := entryFor(idA, seq)
		if err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		putFile(t, st, e.File.Key, e.File.Bytes)
	}
	p, err := l.Resume(ctx, idA, ledger.Log{End: 30}, noLegacy(t))
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 30, nil, 3)

	// Several open files per partition: the last entry's state has runs
	// above Next, and its file fills part of the gap.
	e := entryFor(idA, 3)
	e.Before = offsets.State{Next: 30, Above: offsets.Ranges{{32, 34}, {40, 45}}}
	e.File.Ranges = offsets.Ranges{{30, 31}, {34, 36}}
	if err := l.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e.File.Key, e.File.Bytes)
	p, err = l.Resume(ctx, idA, ledger.Log{End: 50}, noLegacy(t))
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 31, offsets.Ranges{{32, 36}, {40, 45}}, 4)
}

func TestResumeLastFileMissing(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	e0 := entryFor(idA, 0)
	if err := l.Append(ctx, e0); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e0.File.Key, e0.File.Bytes)
	// Entry 1 written, its file never published (a crash between the two).
	e1 := entryFor(idA, 1)
	e1.Before.Above = offsets.Ranges{{15, 17}}
	e1.File.Ranges = offsets.Ranges{{10, 15}}
	if err := l.Append(ctx, e1); err != nil {
		t.Fatal(err)
	}
	p, err := l.Resume(ctx, idA, ledger.Log{End: 20}, noLegacy(t))
	if err != nil {
		t.Fatal(err)
	}
	// The state before entry 1's file, and entry 1's number is used up.
	wantPoint(t, p, true, 10, offsets.Ranges{{15, 17}}, 2)
}

func TestResumeWrongSize(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int64{0, 99, 101, 1 << 20} {
		st, _ := openStore(t)
		l := ledger.New(st, testPrefix)
		e := entryFor(idA, 0) // 100 bytes
		if err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		putFile(t, st, e.File.Key, size)
		_, err := l.Resume(ctx, idA, bigLog, noLegacy(t))
		if err == nil {
			t.Fatalf("Resume with a file of %d bytes, %d in the ledger: no error", size, e.File.Bytes)
		}
		if !strings.Contains(err.Error(), e.File.Key) || !strings.Contains(err.Error(), l.EntryKey(idA, 0)) {
			t.Fatalf("Resume with a file of the wrong size = %q, want it to name %s and its entry", err, e.File.Key)
		}
	}
}

func TestResumeCorruptLastEntry(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	if err := l.Append(ctx, entryFor(idA, 0)); err != nil {
		t.Fatal(err)
	}
	key := l.EntryKey(idA, 1)
	putRaw(t, st, key, []byte(`{"version":1,"seq":`))
	_, err := l.Resume(ctx, idA, bigLog, noLegacy(t))
	var ce *ledger.CorruptError
	if !errors.As(err, &ce) || ce.Key != key {
		t.Fatalf("Resume with a corrupt last entry = %v, want a *ledger.CorruptError for %s", err, key)
	}
}

func TestResumeForeignTopicID(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	// The old topic (id topicIDb) wrote here; topicIDa is the topic now.
	idB := idA
	idB.TopicID = "topicIDb"
	eb := entryFor(idB, 250)
	if err := l.Append(ctx, eb); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, eb.File.Key, eb.File.Bytes)

	for _, opts := range []ledger.ResumeOptions{{}, noLegacy(t)} {
		_, err := l.Resume(ctx, idA, bigLog, opts)
		var fe *ledger.ForeignError
		if !errors.As(err, &fe) {
			t.Fatalf("Resume over another topic id's ledger = %v, want a *ledger.ForeignError", err)
		}
		if fe.Why != "topic id" || fe.Found != "topicIDb" || fe.Prefix != testPrefix || fe.ID != idA {
			t.Fatalf("ForeignError = %+v", fe)
		}
		for _, s := range []string{`"data/"`, "topicIDa", "topicIDb", "storage.prefix", "start_fresh"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ForeignError %q does not say %q", err, s)
			}
		}
	}

	// Every other id is named.
	idC := idA
	idC.TopicID = "topicIDc"
	if err := l.Append(ctx, entryFor(idC, 0)); err != nil {
		t.Fatal(err)
	}
	_, err := l.Resume(ctx, idA, bigLog, ledger.ResumeOptions{})
	var fe *ledger.ForeignError
	if !errors.As(err, &fe) || !strings.Contains(fe.Found, "topicIDb") || !strings.Contains(fe.Found, "topicIDc") {
		t.Fatalf("Resume over two other topic ids' ledgers = %v", err)
	}

	// StartFresh: the new topic starts a ledger beside the old ones.
	p, err := l.Resume(ctx, idA, ledger.Log{End: 10}, ledger.ResumeOptions{StartFresh: true})
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, false, 0, nil, 0)
	ea := entryFor(idA, 0)
	if err := l.Append(ctx, ea); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, ea.File.Key, ea.File.Bytes)
	// From then on the topic has its own ledger, and resumes from it even
	// without StartFresh.
	p, err = l.Resume(ctx, idA, ledger.Log{End: 10}, noLegacy(t))
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 10, nil, 1)
}

// With StartFresh, the old topic's files are not this topic's: where they
// end says nothing of where this topic stands.
func TestResumeStartFreshIgnoresLegacy(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	idB := idA
	idB.TopicID = "topicIDb"
	eb := entryFor(idB, 250) // the old topic stored up to 2510
	if err := l.Append(ctx, eb); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, eb.File.Key, eb.File.Bytes)
	// Legacy as the runner builds it: where the last data file of the
	// partition ends, whoever wrote it.
	opts := ledger.ResumeOptions{StartFresh: true, Legacy: func(context.Context, string, int32) (int64, bool, error) {
		return 2510, true, nil
	}}
	// The new topic has 3000 records: resuming at 2510 would skip 2510 of them.
	p, err := l.Resume(ctx, idA, ledger.Log{End: 3000}, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, false, 0, nil, 0)
}

func TestResumeForeignCluster(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	other := idA
	other.Cluster = "clusterB"
	e := entryFor(other, 0)
	if err := l.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e.File.Key, e.File.Bytes)
	for _, opts := range []ledger.ResumeOptions{noLegacy(t), {StartFresh: true}} {
		_, err := l.Resume(ctx, idA, bigLog, opts)
		var fe *ledger.ForeignError
		if !errors.As(err, &fe) {
			t.Fatalf("Resume over another cluster's ledger = %v, want a *ledger.ForeignError", err)
		}
		if fe.Why != "cluster id" || fe.Found != "clusterB" {
			t.Fatalf("ForeignError = %+v", fe)
		}
		for _, s := range []string{`"data/"`, "clusterA", "clusterB", "storage.prefix"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ForeignError %q does not say %q", err, s)
			}
		}
	}
}

// The way out a cluster-id error offers must be one that works.
func TestResumeForeignClusterAdvice(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	other := idA
	other.Cluster = "clusterB"
	if err := l.Append(ctx, entryFor(other, 0)); err != nil {
		t.Fatal(err)
	}
	_, err := l.Resume(ctx, idA, bigLog, ledger.ResumeOptions{})
	if err == nil || !strings.Contains(err.Error(), "start_fresh") {
		return // start_fresh is not offered: nothing to check
	}
	if _, err := l.Resume(ctx, idA, bigLog, ledger.ResumeOptions{StartFresh: true}); err != nil {
		t.Fatalf("the error offers start_fresh, but with StartFresh Resume still says: %v", err)
	}
}

func TestResumePastEnd(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	e0 := entryFor(idA, 0)
	if err := l.Append(ctx, e0); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e0.File.Key, e0.File.Bytes)
	e1 := entryFor(idA, 1)
	e1.File.Ranges = offsets.Ranges{{10, 12}, {20, 25}}
	if err := l.Append(ctx, e1); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e1.File.Key, e1.File.Bytes)

	// Up to the log end is fine; one past it is not, be it Next or a run
	// above it.
	if _, err := l.Resume(ctx, idA, ledger.Log{End: 25}, noLegacy(t)); err != nil {
		t.Fatalf("Resume with the log end at the stored end: %v", err)
	}
	for _, end := range []int64{24, 12, 0} {
		_, err := l.Resume(ctx, idA, ledger.Log{End: end}, noLegacy(t))
		var pe *ledger.PastEndError
		if !errors.As(err, &pe) {
			t.Fatalf("Resume with the log end at %d = %v, want a *ledger.PastEndError", end, err)
		}
		if pe.Stored != 25 || pe.End != end || pe.ID != idA {
			t.Fatalf("PastEndError = %+v", pe)
		}
		for _, s := range []string{`"data/"`, "events/7", "25", "storage.prefix"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("PastEndError %q does not say %q", err, s)
			}
		}
	}

	// The state before an unpublished file is checked too.
	e2 := entryFor(idA, 2)
	e2.Before = offsets.State{Next: 12, Above: offsets.Ranges{{20, 25}}}
	e2.File.Ranges = offsets.Ranges{{12, 20}}
	if err := l.Append(ctx, e2); err != nil {
		t.Fatal(err)
	}
	var pe *ledger.PastEndError
	if _, err := l.Resume(ctx, idA, ledger.Log{End: 24}, noLegacy(t)); !errors.As(err, &pe) || pe.Stored != 25 {
		t.Fatalf("Resume before an unpublished file, past the end = %v", err)
	}

	// And what Legacy says.
	st2, _ := openStore(t)
	legacy := ledger.ResumeOptions{Legacy: func(context.Context, string, int32) (int64, bool, error) { return 9000, true, nil }}
	if _, err := ledger.New(st2, testPrefix).Resume(ctx, idA, ledger.Log{End: 2750}, legacy); !errors.As(err, &pe) || pe.Stored != 9000 {
		t.Fatalf("Resume from legacy files past the end = %v", err)
	}
}

func TestResumeLegacy(t *testing.T) {
	ctx := context.Background()
	type call struct {
		topic     string
		partition int32
	}
	var calls []call
	next, ok, lerr := int64(0), false, error(nil)
	opts := ledger.ResumeOptions{Legacy: func(_ context.Context, topic string, partition int32) (int64, bool, error) {
		calls = append(calls, call{topic, partition})
		return next, ok, lerr
	}}
	st, root := openStore(t)
	l := ledger.New(st, testPrefix)

	// No ledger, no legacy files.
	p, err := l.Resume(ctx, idA, bigLog, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, false, 0, nil, 0)
	if !slices.Equal(calls, []call{{"events", 7}}) {
		t.Fatalf("Legacy calls %v", calls)
	}

	// No ledger, legacy files up to 1234.
	calls, next, ok = nil, 1234, true
	p, err = l.Resume(ctx, idA, bigLog, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 1234, nil, 0)
	if len(calls) != 1 || p.From == "" {
		t.Fatalf("Legacy calls %v, From %q", calls, p.From)
	}

	// Legacy fails: the error says what to do, and wraps the cause.
	calls, lerr = nil, errors.New("cannot read k-0-9000.jsonl.zst")
	_, err = l.Resume(ctx, idA, bigLog, opts)
	if !errors.Is(err, lerr) || !strings.Contains(err.Error(), "events/7") || !strings.Contains(err.Error(), "storage.prefix") {
		t.Fatalf("Resume when Legacy fails = %v", err)
	}
	lerr = nil

	// Only empty levels (a first write that failed): still no ledger.
	calls = nil
	mkdirKeyDir(t, root, l.EntryKey(idA, 0))
	if p, err = l.Resume(ctx, idA, bigLog, opts); err != nil || len(calls) != 1 || p.State.Next != 1234 {
		t.Fatalf("Resume over empty levels = %+v, %v, Legacy calls %v", p, err, calls)
	}

	// A ledger for another partition of the topic: not this one's.
	calls = nil
	id8 := idA
	id8.Partition = 8
	if err := l.Append(ctx, entryFor(id8, 0)); err != nil {
		t.Fatal(err)
	}
	if p, err = l.Resume(ctx, idA, bigLog, opts); err != nil || len(calls) != 1 || p.State.Next != 1234 {
		t.Fatalf("Resume with a ledger for another partition only = %+v, %v, Legacy calls %v", p, err, calls)
	}

	// Once the partition has a ledger, legacy files are never looked at,
	// even where they would end later.
	calls, next = nil, 5000
	e := entryFor(idA, 0)
	if err := l.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	p, err = l.Resume(ctx, idA, bigLog, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 0, nil, 1) // its file is not published
	putFile(t, st, e.File.Key, e.File.Bytes)
	if p, err = l.Resume(ctx, idA, bigLog, opts); err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 10, nil, 1)
	if len(calls) != 0 {
		t.Fatalf("Legacy called with a ledger: %v", calls)
	}
}

// Resume's cost must not grow with the number of entries: the same calls,
// for 10 entries as for 100,000.
func TestResumeCostIndependentOfEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,000 ledger entries")
	}
	ctx := context.Background()
	counts := map[int64]callCounts{}
	for _, n := range []int64{10, 1_000, 100_000} {
		st, root := openBigStore(t)
		cs := &countingStore{Store: st}
		l := ledger.New(cs, testPrefix)
		start := time.Now()
		writeLedger(t, root, l, idA, n)
		t.Logf("%d entries written in %v", n, time.Since(start).Round(time.Millisecond))
		p, err := l.Resume(ctx, idA, ledger.Log{End: 10 * n}, ledger.ResumeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantPoint(t, p, true, 10*n, nil, n)
		counts[n] = cs.counts()
		t.Logf("%d entries: %+v", n, counts[n])
	}
	if counts[10] != counts[100_000] || counts[10] != counts[1_000] {
		t.Fatalf("calls made by Resume: %+v for 10 entries, %+v for 1,000, %+v for 100,000", counts[10], counts[1_000], counts[100_000])
	}
	if c := counts[10]; c.List != 0 || c.Read != 1 || c.Stat != 1 || c.Put != 0 {
		t.Fatalf("calls made by Resume: %+v, want no List, one Read, one Stat, no Put", c)
	}
}

// BenchmarkResume resumes a partition with 10, 1,000 and 100,000 ledger
// entries. "ratio" times them in the same loop, so that a busy machine
// slows all alike, and reports how much longer the larger ledgers take.
// Past 1,000 entries the last level is full (1,000 names), and from there
// on the cost stays put.
func BenchmarkResume(b *testing.B) {
	ctx := context.Background()
	sizes := []int64{10, 1_000, 100_000}
	ledgers := map[int64]*ledger.Ledger{}
	stores := map[int64]*countingStore{}
	for _, n := range sizes {
		st, root := openBigStore(b)
		stores[n] = &countingStore{Store: st}
		ledgers[n] = ledger.New(stores[n], testPrefix)
		writeLedger(b, root, ledgers[n], idA, n)
	}
	resume := func(b *testing.B, n int64) {
		p, err := ledgers[n].Resume(ctx, idA, ledger.Log{End: 10 * n}, ledger.ResumeOptions{})
		if err != nil || p.State.Next != 10*n {
			b.Fatalf("Resume = %+v, %v", p, err)
		}
	}
	for _, n := range sizes {
		b.Run("entries="+itoa(n), func(b *testing.B) {
			stores[n].reset()
			for b.Loop() {
				resume(b, n)
			}
			c := stores[n].counts()
			b.ReportMetric(float64(c.ListDir+c.List+c.Stat+c.Read)/float64(b.N), "calls/op")
		})
	}
	b.Run("ratio", func(b *testing.B) {
		took := map[int64]time.Duration{}
		for b.Loop() {
			for _, n := range sizes {
				start := time.Now()
				resume(b, n)
				took[n] += time.Since(start)
			}
		}
		for _, n := range sizes {
			b.ReportMetric(float64(took[n].Nanoseconds())/float64(b.N), "ns/resume-"+itoa(n))
		}
		b.ReportMetric(float64(took[100_000])/float64(took[10]), "ratio-100000/10")
		b.ReportMetric(float64(took[100_000])/float64(took[1_000]), "ratio-100000/1000")
	})
}

// TestResumeZombiePublishedFirst: a writer that lost the partition wrote
// entry 1 and was paused; the new owner found entry 1's file missing,
// resumed from its Before, and entered the same name as entry 2; then the
// old writer woke up and published its file first, so the new owner's
// commit failed. The file under that name is entry 1's: resume takes
// entry 1's state after, not a size mismatch that would stop every
// restart.
func TestResumeZombiePublishedFirst(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	e0 := entryFor(idA, 0)
	if err := l.Append(ctx, e0); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e0.File.Key, e0.File.Bytes)
	e1 := entryFor(idA, 1) // the paused writer's
	if err := l.Append(ctx, e1); err != nil {
		t.Fatal(err)
	}
	e2 := entryFor(idA, 1) // the new owner's: same Before, same name, other bytes
	e2.Seq = 2
	e2.File.Bytes = 555
	if err := l.Append(ctx, e2); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e1.File.Key, e1.File.Bytes) // the zombie wins the name
	p, err := l.Resume(ctx, idA, ledger.Log{End: 30}, noLegacy(t))
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 20, nil, 3)
}

// TestResumeZombiePublishedFirstAfterOtherFiles: as above, but the new
// owner published a file of another name (entry 2) before it entered the
// zombie's name again (entry 3): with several open files per partition,
// files close in any order. Entry 1's file is stored, entry 3 is void, and
// what is handled is entry 3's Before plus entry 1's offsets. Found by the
// property test (TestPropLateZombiePublish) beside a CPU hog.
func TestResumeZombiePublishedFirstAfterOtherFiles(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	e0 := entryFor(idA, 0) // [0,10)
	if err := l.Append(ctx, e0); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e0.File.Key, e0.File.Bytes)
	e1 := entryFor(idA, 1) // the paused writer's: [10,20)
	if err := l.Append(ctx, e1); err != nil {
		t.Fatal(err)
	}
	e2 := entryFor(idA, 2) // the new owner's other file: [20,30), from e1's Before
	e2.Before = e1.Before
	if err := l.Append(ctx, e2); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e2.File.Key, e2.File.Bytes)
	e3 := entryFor(idA, 1) // the new owner again, under e1's name, after e2
	e3.Seq = 3
	e3.Before = e2.After()
	e3.File.Bytes = 555
	if err := l.Append(ctx, e3); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e1.File.Key, e1.File.Bytes) // the zombie wins the name
	p, err := l.Resume(ctx, idA, ledger.Log{End: 40}, noLegacy(t))
	if err != nil {
		t.Fatal(err)
	}
	wantPoint(t, p, true, 30, nil, 4)

	// If the new owner had stored some of the zombie's offsets under
	// another name, storage holds them twice: an error naming the file.
	st2, _ := openStore(t)
	l2 := ledger.New(st2, testPrefix)
	for _, e := range []*ledger.Entry{e0, e1} {
		if err := l2.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	putFile(t, st2, e0.File.Key, e0.File.Bytes)
	dup := entryFor(idA, 2)
	dup.Before = e1.Before
	dup.File.Ranges = offsets.Ranges{{15, 30}}
	if err := l2.Append(ctx, dup); err != nil {
		t.Fatal(err)
	}
	putFile(t, st2, dup.File.Key, dup.File.Bytes)
	e3b := *e3
	e3b.Before = dup.After()
	e3b.File.Ranges = offsets.Ranges{{10, 15}} // the rest went to dup's file
	if err := l2.Append(ctx, &e3b); err != nil {
		t.Fatal(err)
	}
	putFile(t, st2, e1.File.Key, e1.File.Bytes)
	_, err = l2.Resume(ctx, idA, ledger.Log{End: 40}, noLegacy(t))
	if err == nil || !strings.Contains(err.Error(), "[15,20)") || !strings.Contains(err.Error(), "delete "+e1.File.Key) {
		t.Fatalf("Resume = %v, want the duplicated offsets and the file to delete", err)
	}
}

// TestResumeOtherGroup: a ledger written by another kafka.group is taken
// over, and the point's note says whether that group runs. A group this
// principal may not describe (an ACL, a broker that does not answer) only
// words the note: the run goes on, fenced by the ledger's create-only
// entries, instead of stopping on a check that decides nothing.
func TestResumeOtherGroup(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	e := entryFor(idA, 0)
	e.Deployment = ledger.Deployment{Group: "old"}
	if err := l.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, e.File.Key, e.File.Bytes)
	for _, c := range []struct {
		active bool
		err    error
		want   string
	}{
		{false, nil, "which has no members now"},
		{true, nil, "which has members now"},
		{false, errors.New("GROUP_AUTHORIZATION_FAILED"), "could not be told (GROUP_AUTHORIZATION_FAILED)"},
	} {
		opts := noLegacy(t)
		opts.Deployment = ledger.Deployment{Group: "new"}
		opts.GroupActive = func(_ context.Context, g string) (bool, error) {
			if g != "old" {
				t.Errorf("GroupActive(%q), want the ledger's group", g)
			}
			return c.active, c.err
		}
		p, err := l.Resume(ctx, idA, ledger.Log{End: 10}, opts)
		if err != nil {
			t.Fatalf("active %v, err %v: Resume: %v", c.active, c.err, err)
		}
		wantPoint(t, p, true, 10, nil, 1)
		if !strings.Contains(p.Note, c.want) || !strings.Contains(p.Note, `kafka.group "old"`) {
			t.Errorf("active %v, err %v: note %q, want it to say %q", c.active, c.err, p.Note, c.want)
		}
	}
}
