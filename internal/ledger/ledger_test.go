package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

func TestEntryKey(t *testing.T) {
	l := ledger.New(nil, testPrefix)
	base := "data/_spillway/ledger/events/topicIDa/7/"
	for seq, want := range map[int64]string{
		0:               base + "000/000/000/000.json",
		7:               base + "000/000/000/007.json",
		999:             base + "000/000/000/999.json",
		1000:            base + "000/000/001/000.json",
		1_234_567:       base + "000/001/234/567.json",
		1_000_000:       base + "000/001/000/000.json",
		999_999_999_999: base + "999/999/999/999.json",
	} {
		if got := l.EntryKey(idA, seq); got != want {
			t.Errorf("EntryKey(%d) = %s, want %s", seq, got, want)
		}
	}
	// The ledger's directory starts with "_", which Hive-style readers skip.
	if !strings.HasPrefix(ledger.StateDir, "_") {
		t.Errorf("StateDir %q does not start with _", ledger.StateDir)
	}
	// Without a prefix, at the root of the bucket.
	if got := ledger.New(nil, "").EntryKey(idA, 1); got != "_spillway/ledger/events/topicIDa/7/000/000/000/001.json" {
		t.Errorf("EntryKey without a prefix = %s", got)
	}
	// Partition 1 and 10 don't share a directory.
	id1, id10 := idA, idA
	id1.Partition, id10.Partition = 1, 10
	if k1, k10 := l.EntryKey(id1, 0), l.EntryKey(id10, 0); strings.HasPrefix(k10, strings.TrimSuffix(k1, "000/000/000/000.json")) {
		t.Errorf("partition 10's key %s is under partition 1's directory (%s)", k10, k1)
	}
}

func TestLedgerAppendRead(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)

	e := entryFor(idA, 3)
	e.Before.Above = offsets.Ranges{{45, 47}}
	e.File.Ranges = offsets.Ranges{{30, 40}, {50, 51}}
	if err := l.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	if e.Version != 1 {
		t.Fatalf("Append left Version %d, want 1 (an entry without gaps stays readable by older builds)", e.Version)
	}
	got, err := l.Read(ctx, idA, l.EntryKey(idA, 3))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, got), mustJSON(t, e); !bytes.Equal(a, b) {
		t.Fatalf("read back\n%s\nwant\n%s", a, b)
	}
	if got.Identity() != idA {
		t.Fatalf("Identity() = %v, want %v", got.Identity(), idA)
	}
	if after := got.After(); after.Next != 40 || !slices.Equal(after.Above, offsets.Ranges{{45, 47}, {50, 51}}) {
		t.Fatalf("After() = %+v", after)
	}

	// Create-only: the second writer of a sequence number loses, and the
	// first one's entry stays.
	other := entryFor(idA, 3)
	other.Writer = "zombie"
	if err := l.Append(ctx, other); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second Append of seq 3 = %v, want storage.ErrExists", err)
	}
	if got, err := l.Read(ctx, idA, l.EntryKey(idA, 3)); err != nil || got.Writer != "test" {
		t.Fatalf("after a refused Append: %+v, %v", got, err)
	}
}

func TestLedgerTopicIDs(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	if ids, err := l.TopicIDs(ctx, "events"); err != nil || len(ids) != 0 {
		t.Fatalf("TopicIDs with no ledger = %v, %v", ids, err)
	}
	idB := idA
	idB.TopicID = "topicIDb"
	other := idA
	other.Topic = "other"
	other.TopicID = "topicIDo"
	for _, id := range []ledger.Identity{idA, idB, other} {
		if err := l.Append(ctx, entryFor(id, 0)); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := l.TopicIDs(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"topicIDa", "topicIDb"}) {
		t.Fatalf("TopicIDs(events) = %v", ids)
	}
}

func TestLedgerLast(t *testing.T) {
	ctx := context.Background()
	st, root := openStore(t)
	l := ledger.New(st, testPrefix)
	last := func(want int64) {
		t.Helper()
		e, err := l.Last(ctx, idA)
		if err != nil {
			t.Fatal(err)
		}
		if want < 0 {
			if e != nil {
				t.Fatalf("Last = entry %d, want none", e.Seq)
			}
			return
		}
		if e == nil || e.Seq != want {
			t.Fatalf("Last = %+v, want entry %d", e, want)
		}
	}
	last(-1)

	// Level boundaries: 999 is 000/000/000/999, 1000 is 000/000/001/000,
	// 1,000,000 is 000/001/000/000. Written out of order.
	for _, seq := range []int64{1000, 5, 999} {
		if err := l.Append(ctx, entryFor(idA, seq)); err != nil {
			t.Fatal(err)
		}
	}
	last(1000)
	if err := l.Append(ctx, entryFor(idA, 1_000_000)); err != nil {
		t.Fatal(err)
	}
	last(1_000_000)
	if err := l.Append(ctx, entryFor(idA, 1_000_001)); err != nil {
		t.Fatal(err)
	}
	last(1_000_001)

	// Another partition's and another topic id's entries are not this
	// partition's.
	for _, mod := range []func(*ledger.Identity){
		func(id *ledger.Identity) { id.Partition = 70 },
		func(id *ledger.Identity) { id.TopicID = "topicIDb" },
	} {
		id := idA
		mod(&id)
		if err := l.Append(ctx, entryFor(id, 5_000_000)); err != nil {
			t.Fatal(err)
		}
	}
	last(1_000_001)

	// Names that are not entries are ignored, at every level.
	dir := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(l.EntryKey(idA, 0), "000/000/000/000.json")))
	for _, p := range []string{
		"999/999/999/99x.json", // not digits
		"999/999/999/9999.json",
		"998/999/999/999.txt",
		"9999/000/000/000.json", // a level of four digits
		"abc/000/000/000.json",
		"000/001/000/002.json.tmp",
		"000/001/000/.002.json.123", // a temp file of a write in progress
	} {
		p := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A file where a directory level is expected, and a directory where an
	// entry is expected.
	if err := os.WriteFile(filepath.Join(dir, "997"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "000", "001", "000", "009.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Empty levels, left by a write that failed after making its
	// directories: Last steps back over them.
	for _, d := range []string{"996", "000/002", "000/001/001", "000/001/000/zzz"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	last(1_000_001)
}

// A partition whose only levels are empty has no last entry.
func TestLedgerLastOnlyEmptyLevels(t *testing.T) {
	ctx := context.Background()
	st, root := openStore(t)
	l := ledger.New(st, testPrefix)
	k := l.EntryKey(idA, 1_000)
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, filepath.FromSlash(k))), 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := l.Last(ctx, idA)
	if err != nil || e != nil {
		t.Fatalf("Last = %+v, %v; want none", e, err)
	}
}

// Read refuses what Spillway can't have written for that key, naming it.
func TestLedgerReadCorrupt(t *testing.T) {
	ctx := context.Background()
	valid := func(seq int64) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(mustJSON(t, func() *ledger.Entry {
			e := entryFor(idA, seq)
			e.Version = ledger.EntryVersion
			return e
		}()), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	with := func(f func(m map[string]any)) []byte {
		m := valid(4)
		f(m)
		return mustJSON(t, m)
	}
	file := func(m map[string]any) map[string]any { return m["file"].(map[string]any) }
	random := make([]byte, 512)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	for _, c := range []struct {
		name string
		data []byte
		why  string // in the error
	}{
		{"random bytes", random, ""},
		{"empty", nil, ""},
		{"JSON of another shape", []byte(`[1,2,3]`), ""},
		{"an unknown field", with(func(m map[string]any) { m["offsets"] = 7 }), "offsets"},
		{"an unknown nested field", with(func(m map[string]any) { file(m)["checksum"] = "x" }), "checksum"},
		{"another topic", with(func(m map[string]any) { m["topic"] = "other" }), "other/7"},
		{"another partition", with(func(m map[string]any) { m["partition"] = 8 }), "events/8"},
		{"another topic id", with(func(m map[string]any) { m["topic_id"] = "topicIDb" }), "topicIDb"},
		{"another seq", with(func(m map[string]any) { m["seq"] = 5 }), "seq 5"},
		{"version 0", with(func(m map[string]any) { m["version"] = 0 }), "version 0"},
		{"a later version", with(func(m map[string]any) { m["version"] = ledger.EntryVersion + 1 }), "version"},
		{"a negative seq", with(func(m map[string]any) { m["seq"] = -4 }), ""},
		{"no file key", with(func(m map[string]any) { file(m)["key"] = "" }), ""},
		{"negative bytes", with(func(m map[string]any) { file(m)["bytes"] = -1 }), ""},
		{"negative records", with(func(m map[string]any) { file(m)["records"] = -1 }), ""},
		{"negative next", with(func(m map[string]any) { m["before"] = map[string]any{"next": -1, "above": []any{}} }), ""},
		{"overlapping file ranges", with(func(m map[string]any) { file(m)["ranges"] = [][2]int64{{40, 50}, {45, 60}} }), "file.ranges"},
		{"an empty file range", with(func(m map[string]any) { file(m)["ranges"] = [][2]int64{{40, 40}} }), "file.ranges"},
		{"bad before.above", with(func(m map[string]any) { m["before"] = map[string]any{"next": 40, "above": [][2]int64{{60, 50}}} }), "before.above"},
		{"a string for a number", with(func(m map[string]any) { m["seq"] = "4" }), ""},
		{"truncated", with(func(map[string]any) {})[:40], ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := openStore(t)
			l := ledger.New(st, testPrefix)
			key := l.EntryKey(idA, 4)
			putRaw(t, st, key, c.data)
			wantCorrupt := func(what string, err error) {
				t.Helper()
				var ce *ledger.CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("%s = %v, want a *ledger.CorruptError", what, err)
				}
				if ce.Key != key || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), c.why) {
					t.Fatalf("%s = %q (key %q), want it to name %s and say %q", what, err, ce.Key, key, c.why)
				}
			}
			e, err := l.Read(ctx, idA, key)
			wantCorrupt("Read", err)
			if e != nil {
				t.Fatalf("Read returned an entry with its error: %+v", e)
			}
			_, err = l.Last(ctx, idA)
			wantCorrupt("Last", err)
		})
	}
}

// One valid entry with bytes after it is not what Append writes.
func TestLedgerReadTrailingData(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	key := l.EntryKey(idA, 4)
	e := entryFor(idA, 4)
	e.Version = ledger.EntryVersion
	putRaw(t, st, key, append(mustJSON(t, e), []byte(`{"seq": 9} and more`)...))
	var ce *ledger.CorruptError
	if _, err := l.Read(ctx, idA, key); !errors.As(err, &ce) {
		t.Fatalf("Read of an entry followed by other bytes = %v, want a *ledger.CorruptError", err)
	}
}

func TestLedgerEntries(t *testing.T) {
	ctx := context.Background()
	st, _ := openStore(t)
	l := ledger.New(st, testPrefix)
	seqs := []int64{1000, 3, 0, 1_000_000, 2, 999, 1}
	for _, seq := range seqs {
		if err := l.Append(ctx, entryFor(idA, seq)); err != nil {
			t.Fatal(err)
		}
	}
	// Another partition's entries are not listed.
	id70 := idA
	id70.Partition = 70
	if err := l.Append(ctx, entryFor(id70, 4)); err != nil {
		t.Fatal(err)
	}
	// A corrupt entry is reported in its place, and the walk goes on.
	putRaw(t, st, l.EntryKey(idA, 500), []byte("garbage"))

	var got []int64
	var corrupt []string
	err := l.Entries(ctx, idA, func(key string, e *ledger.Entry, err error) error {
		if err != nil {
			var ce *ledger.CorruptError
			if !errors.As(err, &ce) || ce.Key != key || e != nil {
				t.Fatalf("Entries gave %s with %+v, %v", key, e, err)
			}
			corrupt = append(corrupt, key)
			return nil
		}
		if key != l.EntryKey(idA, e.Seq) {
			t.Fatalf("Entries gave entry %d under %s", e.Seq, key)
		}
		got = append(got, e.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 1, 2, 3, 999, 1000, 1_000_000}; !slices.Equal(got, want) {
		t.Fatalf("Entries in order %v, want %v", got, want)
	}
	if !slices.Equal(corrupt, []string{l.EntryKey(idA, 500)}) {
		t.Fatalf("corrupt entries %v", corrupt)
	}

	// fn's error stops the walk and is returned.
	stop := errors.New("stop")
	n := 0
	err = l.Entries(ctx, idA, func(string, *ledger.Entry, error) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Entries after fn failed: %v, %d calls", err, n)
	}

	// No ledger: no calls.
	idNone := idA
	idNone.Partition = 9
	if err := l.Entries(ctx, idNone, func(string, *ledger.Entry, error) error {
		t.Fatal("fn called for a partition with no ledger")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestLedgerEntryDirs(t *testing.T) {
	l := ledger.New(nil, "p/")
	id := ledger.Identity{Topic: "t", TopicID: "id", Partition: 3}
	for seq, want := range map[int64][]string{
		0:    {"p/_spillway/ledger/t/id/3/000/000/000/"},
		5:    {"p/_spillway/ledger/t/id/3/000/000/000/"},
		1000: {"p/_spillway/ledger/t/id/3/000/000/000/", "p/_spillway/ledger/t/id/3/000/000/001/"},
	} {
		if got := l.EntryDirs(id, seq); !reflect.DeepEqual(got, want) {
			t.Errorf("EntryDirs(%d) = %v, want %v", seq, got, want)
		}
	}
}
