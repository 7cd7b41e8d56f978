package sink_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// publishedSink is a sink with a ledger over a local directory whose
// commits pass through refuse (nil: all pass), and whose Published hook
// checks, at each call, that the file and its ledger entry are stored,
// and records the entries.
type publishedSink struct {
	s      *sink.Sink
	dir    string
	ledger *ledger.Ledger
	id     ledger.Identity

	mu      sync.Mutex
	entries []ledger.Entry
}

func newPublishedSink(t *testing.T, refuse func(key string) error) *publishedSink {
	t.Helper()
	ctx := context.Background()
	p := &publishedSink{dir: t.TempDir(), id: ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0}}
	o := storage.Options{PartSize: 64 << 10}
	if refuse != nil {
		o.Faults = &storage.Faults{BeforeCommit: refuse}
	}
	bucket, err := storage.Open(ctx, "file://"+p.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	cfg := baseConfig(t)
	cfg.MaxRecords = 100
	p.ledger = ledger.New(bucket, "")
	cfg.Ledger = p.ledger
	cfg.Published = func(tp offsets.TopicPartition, e ledger.Entry) {
		// Durable by now: the file is there to read, and so is its entry.
		if _, err := os.Stat(filepath.Join(p.dir, filepath.FromSlash(e.File.Key))); err != nil {
			t.Errorf("Published(%s) before the file is stored: %v", e.File.Key, err)
		}
		if got, err := p.ledger.Read(ctx, p.id, p.ledger.EntryKey(p.id, e.Seq)); err != nil || got.File.Key != e.File.Key {
			t.Errorf("Published(%s) before its ledger entry %d is stored: %v, %v", e.File.Key, e.Seq, got, err)
		}
		if tp.Topic != e.Topic || tp.Partition != e.Partition {
			t.Errorf("Published(%v) with the entry of %s/%d", tp, e.Topic, e.Partition)
		}
		p.mu.Lock()
		p.entries = append(p.entries, e)
		p.mu.Unlock()
	}
	p.s = sink.New(cfg, sink.FromStorage(bucket), budget.New(1<<30, 0), slog.New(slog.DiscardHandler))
	t.Cleanup(p.s.Close)
	p.s.Assign(tp("t", 0), p.id, ledger.Point{State: offsets.State{Next: 0}})
	return p
}

func (p *publishedSink) published() []ledger.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ledger.Entry(nil), p.entries...)
}

// TestPublishedOncePerFile: the hook tables commit from hears of every
// stored data file once, in its partition's order, after the file and its
// ledger entry are durable, with the entry the ledger holds.
func TestPublishedOncePerFile(t *testing.T) {
	t.Parallel()
	p := newPublishedSink(t, nil)
	ctx := context.Background()
	if err := p.s.Write(ctx, recs("t", 0, 0, 250)); err != nil {
		t.Fatal(err)
	}
	if err := p.s.Flush(ctx, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	got := p.published()
	var want []ledger.Entry
	if err := p.ledger.Entries(ctx, p.id, func(_ string, e *ledger.Entry, err error) error {
		if err == nil {
			want = append(want, *e)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("%d files published, %d ledger entries; want 3 of each", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].File.Key != want[i].File.Key || !slices.Equal(got[i].File.Ranges, want[i].File.Ranges) {
			t.Errorf("published #%d: seq %d %s %v; the ledger's: seq %d %s %v", i, got[i].Seq, got[i].File.Key, got[i].File.Ranges, want[i].Seq, want[i].File.Key, want[i].File.Ranges)
		}
	}
}

// TestPublishedNotOnFailure: a file whose upload is refused, or whose
// ledger entry can't be written, is never published, and neither is any
// later file of its partition.
func TestPublishedNotOnFailure(t *testing.T) {
	t.Parallel()
	id := ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0}
	entry1 := ledger.New(nil, "").EntryKey(id, 1) // the second file's
	for name, fails := range map[string]func(string) bool{
		"data file":    func(k string) bool { return k == key("t", 0, 100) },
		"ledger entry": func(k string) bool { return k == entry1 },
	} {
		refuse := errors.New("storage refused the " + name)
		p := newPublishedSink(t, func(k string) error {
			if fails(k) {
				return refuse
			}
			return nil
		})
		ctx := context.Background()
		if err := p.s.Write(ctx, recs("t", 0, 0, 250)); err != nil {
			t.Fatal(err)
		}
		if err := p.s.Flush(ctx, nil, offsets.ReasonShutdown); !errors.Is(err, refuse) {
			t.Fatalf("%s: Flush = %v, want the refusal", name, err)
		}
		got := p.published()
		if len(got) != 1 || got[0].File.Key != key("t", 0, 0) {
			t.Errorf("%s: published %v, want only the first file, %s", name, got, key("t", 0, 0))
		}
	}
}
