package audit

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/testkit/datafiles"
)

// scanFixture writes a partition's ledger and files by hand, as the sink
// would, so that each test shapes the one thing it checks.
type scanFixture struct {
	t      *testing.T
	dir    string
	names  naming.Names
	ledger *ledger.Ledger
	id     ledger.Identity
	seq    int64
	// nextKey, when set, names the next entry's file instead of the
	// template.
	nextKey string
	// typ is the format entries' files are written in; "" is jsonl.
	typ string
	// noSum writes entries as versions before file.crc32c did.
	noSum bool
}

func newScanFixture(t *testing.T) *scanFixture {
	t.Helper()
	dir := t.TempDir()
	names, err := naming.NewNames("data/", "{{topic}}-{{partition}}-{{start_offset}}", ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	b := datafiles.OpenDir(t, dir)
	return &scanFixture{t: t, dir: dir, names: names, ledger: ledger.New(b, names.Prefix),
		id: ledger.Identity{Cluster: "c1", Topic: "t", TopicID: "id1", Partition: 0}}
}

// entry appends the next entry: state before, the file's runs. With
// publish, the file is written too, holding one record per offset of its
// runs.
func (f *scanFixture) entry(before offsets.State, runs offsets.Ranges, publish bool) *ledger.Entry {
	f.t.Helper()
	var offs []int64
	for _, r := range runs {
		for o := r[0]; o < r[1]; o++ {
			offs = append(offs, o)
		}
	}
	key := f.names.Key(naming.Vars{Topic: f.id.Topic, Partition: f.id.Partition, StartOffset: runs[0][0]})
	if f.nextKey != "" {
		key, f.nextKey = f.nextKey, ""
	}
	e := &ledger.Entry{Cluster: f.id.Cluster, Topic: f.id.Topic, TopicID: f.id.TopicID, Partition: f.id.Partition, Seq: f.seq,
		Before: before, File: ledger.FileInfo{Key: key, Ranges: runs, Records: int64(len(offs))}}
	typ, comp := f.typ, "zstd"
	if typ == "" {
		typ, comp = "jsonl", "none"
	}
	datafiles.Write(f.t, f.dir, key, typ, comp, offs...)
	e.File.Bytes = f.size(key)
	if !f.noSum {
		e.File.CRC32C = f.sum(key)
	}
	if !publish {
		f.remove(key)
	}
	if err := f.ledger.Append(context.Background(), e); err != nil {
		f.t.Fatal(err)
	}
	f.seq++
	return e
}

func (f *scanFixture) size(key string) int64 {
	f.t.Helper()
	st, err := os.Stat(filepath.Join(f.dir, filepath.FromSlash(key)))
	if err != nil {
		f.t.Fatal(err)
	}
	return st.Size()
}

// sum is the CRC-32C of the file under key, as the storage writer that
// wrote it would have summed it.
func (f *scanFixture) sum(key string) string {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(key)))
	if err != nil {
		f.t.Fatal(err)
	}
	return ledger.FormatCRC32C(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
}

func (f *scanFixture) remove(key string) {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.dir, filepath.FromSlash(key))); err != nil {
		f.t.Fatal(err)
	}
}

func (f *scanFixture) scan(deep *DeepOptions) (*Scan, *PartitionScan) {
	f.t.Helper()
	s, err := NewScan(context.Background(), datafiles.OpenDir(f.t, f.dir), f.names)
	if err != nil {
		f.t.Fatal(err)
	}
	ps, err := s.Partition(context.Background(), f.id, deep)
	if err != nil {
		f.t.Fatal(err)
	}
	return s, ps
}

// kinds lists the problems as "kind key" lines, sorted.
func kinds(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, strings.TrimSpace(p.Kind+" "+p.Key))
	}
	sort.Strings(out)
	return out
}

func wantKinds(t *testing.T, got []Problem, want ...string) {
	t.Helper()
	sort.Strings(want)
	if g := kinds(got); !reflect.DeepEqual(g, want) && (len(g) > 0 || len(want) > 0) {
		var msgs []string
		for _, p := range got {
			msgs = append(msgs, p.Message)
		}
		t.Errorf("problems %q, want %q\n%s", g, want, strings.Join(msgs, "\n"))
	}
}

func TestScanClean(t *testing.T) {
	f := newScanFixture(t)
	f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 20}}, true)
	// Records 20 and 21 were skipped by the error policy: handled, in no
	// file.
	f.entry(offsets.State{Next: 22}, offsets.Ranges{{22, 30}}, true)
	// Several files open at once: the third holds runs around the
	// fourth's.
	f.entry(offsets.State{Next: 30}, offsets.Ranges{{30, 32}, {34, 36}}, true)
	f.entry(offsets.State{Next: 32, Above: offsets.Ranges{{34, 36}}}, offsets.Ranges{{32, 34}}, true)
	s, ps := f.scan(&DeepOptions{OffsetField: true})
	wantKinds(t, ps.Problems)
	if ps.Start != 10 || ps.Entries != 4 || ps.Files != 4 || ps.Records != 24 || ps.Handled.Next != 36 || len(ps.Handled.Above) != 0 || ps.Pending != nil {
		t.Errorf("scan %+v", ps)
	}
	if !reflect.DeepEqual(ps.Stored, offsets.Ranges{{10, 20}, {22, 36}}) || !reflect.DeepEqual(ps.Skipped, offsets.Ranges{{20, 22}}) || len(ps.Duplicates) != 0 {
		t.Errorf("stored %v skipped %v duplicates %v", ps.Stored, ps.Skipped, ps.Duplicates)
	}
	if ps.Deep.Files != 4 || ps.Deep.Records != 24 || len(ps.Deep.NotChecked) != 0 {
		t.Errorf("deep %+v", ps.Deep)
	}
	wantKinds(t, s.Unknown(map[string]bool{"t": true}))
}

// TestScanVoid: entries whose file was never published, as a crash between
// the two steps leaves them, are no problem, at the head or below it.
func TestScanVoid(t *testing.T) {
	f := newScanFixture(t)
	f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 10}}, true)
	f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 20}}, false) // the writer died
	// The next owner stored them again, in other files.
	f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 15}}, true)
	f.entry(offsets.State{Next: 15}, offsets.Ranges{{15, 20}}, true)
	last := f.entry(offsets.State{Next: 20}, offsets.Ranges{{20, 30}}, false)
	_, ps := f.scan(nil)
	wantKinds(t, ps.Problems)
	if ps.Pending == nil || ps.Pending.Seq != last.Seq || ps.Handled.Next != 20 || ps.Files != 3 {
		t.Errorf("scan %+v", ps)
	}
	if !reflect.DeepEqual(ps.Stored, offsets.Ranges{{0, 20}}) || len(ps.Skipped) != 0 {
		t.Errorf("stored %v skipped %v", ps.Stored, ps.Skipped)
	}
}

func TestScanDefects(t *testing.T) {
	t.Run("file missing and size differs", func(t *testing.T) {
		f := newScanFixture(t)
		a := f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 10}}, true)
		b := f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 20}}, true)
		f.entry(offsets.State{Next: 20}, offsets.Ranges{{20, 30}}, true)
		f.remove(a.File.Key)
		datafiles.Put(t, f.dir, b.File.Key, []byte("{\"offset\":10}\n"))
		_, ps := f.scan(nil)
		wantKinds(t, ps.Problems, "file_missing "+a.File.Key, "size_mismatch "+b.File.Key)
		if !reflect.DeepEqual(ps.Stored, offsets.Ranges{{20, 30}}) || len(ps.Skipped) != 0 || ps.Handled.Next != 30 {
			t.Errorf("stored %v skipped %v handled %v", ps.Stored, ps.Skipped, ps.Handled)
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		f := newScanFixture(t)
		f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 10}}, true)
		f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 20}}, true)
		// A third file claims offsets of the first. Its entry is valid on
		// its own (an entry whose runs overlap its own state before is
		// corrupt): a racing writer's, from an older state, which also
		// makes the second file look published late.
		dup := f.entry(offsets.State{Next: 5}, offsets.Ranges{{5, 8}}, true)
		_, ps := f.scan(nil)
		wantKinds(t, ps.Problems, "duplicate "+dup.File.Key, "void_file_present data/t-0-10.jsonl")
		if !reflect.DeepEqual(ps.Duplicates, offsets.Ranges{{5, 8}}) || !strings.Contains(ps.Problems[1].Message, "data/t-0-0.jsonl") {
			t.Errorf("duplicates %v: %v", ps.Duplicates, ps.Problems)
		}
	})
	t.Run("void file published late", func(t *testing.T) {
		f := newScanFixture(t)
		f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 10}}, true)
		// Entry 1's file was published after entry 2 was written
		// without it (a writer that had lost the partition).
		late := f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 20}}, true)
		f.nextKey = "data/t-0-10-again.jsonl"
		f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 18}, {19, 20}}, true)
		_, ps := f.scan(nil)
		wantKinds(t, ps.Problems, "void_file_present "+late.File.Key, "duplicate data/t-0-10-again.jsonl")
		if !reflect.DeepEqual(ps.Duplicates, offsets.Ranges{{10, 18}, {19, 20}}) {
			t.Errorf("duplicates %v", ps.Duplicates)
		}
	})
	t.Run("corrupt, missing, foreign and inconsistent entries", func(t *testing.T) {
		f := newScanFixture(t)
		f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 10}}, true)
		bad := f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 20}}, true)
		f.entry(offsets.State{Next: 20}, offsets.Ranges{{20, 30}}, true)
		f.seq++ // entry 3 never written
		f.entry(offsets.State{Next: 30}, offsets.Ranges{{30, 40}}, true)
		// Entry 5 holds part of entry 4's runs in its state.
		f.entry(offsets.State{Next: 35}, offsets.Ranges{{40, 50}}, true)
		f.id.Cluster = "c2"
		other := f.entry(offsets.State{Next: 50}, offsets.Ranges{{50, 60}}, true)
		f.id.Cluster = "c1"
		key1, key3, key6 := f.ledger.EntryKey(f.id, 1), f.ledger.EntryKey(f.id, 3), f.ledger.EntryKey(f.id, 6)
		datafiles.Put(t, f.dir, key1, []byte(`{"version":1,`))
		// The partition's directory, as the ledger lays it out.
		partDir := f.ledger.TopicDir(f.id.Topic) + f.id.TopicID + "/" + strconv.Itoa(int(f.id.Partition)) + "/"
		datafiles.Put(t, f.dir, partDir+"notes.txt", []byte("hello"))
		s, ps := f.scan(nil)
		wantKinds(t, ps.Problems, "corrupt_entry "+key1, "corrupt_entry "+partDir+"notes.txt",
			"entry_missing "+key3, "foreign_cluster "+key6, "ledger_inconsistent "+f.ledger.EntryKey(f.id, 5))
		// The corrupt entry's file is named by nothing readable.
		wantKinds(t, s.Unknown(map[string]bool{"t": true}), "unknown_file "+bad.File.Key)
		// Its runs, and those of the missing entry, can't be told from
		// skipped offsets.
		if len(ps.Skipped) != 0 || !reflect.DeepEqual(ps.Stored, offsets.Ranges{{0, 10}, {20, 50}}) {
			t.Errorf("skipped %v, stored %v", ps.Skipped, ps.Stored)
		}
		if s.named[other.File.Key] != true {
			t.Errorf("the foreign cluster's file %s would be reported as unknown", other.File.Key)
		}
	})
}

func TestScanDeep(t *testing.T) {
	f := newScanFixture(t)
	a := f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 4}}, true)
	b := f.entry(offsets.State{Next: 4}, offsets.Ranges{{4, 8}}, true)
	c := f.entry(offsets.State{Next: 8}, offsets.Ranges{{8, 12}}, true)
	f.entry(offsets.State{Next: 12}, offsets.Ranges{{12, 16}}, true)
	// Same sizes, other contents: a record that isn't JSON, an offset
	// outside the runs, one record too many.
	rewrite := func(key, from, to string) {
		t.Helper()
		p := filepath.Join(f.dir, filepath.FromSlash(key))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out := strings.Replace(string(data), from, to, 1)
		if len(out) != len(data) || out == string(data) {
			t.Fatalf("rewrite %s: %q not found or size changed", key, from)
		}
		datafiles.Put(t, f.dir, key, []byte(out))
	}
	rewrite(a.File.Key, `"n":2,`, `"n":2;`)
	rewrite(b.File.Key, `"offset":6`, `"offset":9`)
	data, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(c.File.Key)))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	// Record 1 becomes two records of the same size in all, the second
	// without an offset.
	first := `{"offset":9}`
	lines[1] = first + "\n" + `{"x":"` + strings.Repeat("y", len(lines[1])-len(first)-10) + `"}` + "\n"
	datafiles.Put(t, f.dir, c.File.Key, []byte(strings.Join(lines, "")))
	// Each edit keeps the size: the checksums tell all three too.
	sums := []string{"checksum_mismatch " + a.File.Key, "checksum_mismatch " + b.File.Key, "checksum_mismatch " + c.File.Key}
	_, ps := f.scan(&DeepOptions{OffsetField: true})
	wantKinds(t, ps.Problems, append(sums, "unreadable_record "+a.File.Key, "offset_outside_runs "+b.File.Key, "record_count "+c.File.Key)...)
	for _, p := range ps.Problems {
		if p.Kind == ProblemUnreadable && (p.Record == nil || *p.Record != 2) {
			t.Errorf("unreadable record: %+v, want record 2", p)
		}
	}
	if ps.Deep.Files != 4 || ps.Deep.Records != 17 {
		t.Errorf("deep %+v", ps.Deep)
	}

	// Without offsets in the records (or the config saying so), records
	// are read and counted, and the report says what wasn't checked.
	_, ps = f.scan(&DeepOptions{OffsetField: false})
	wantKinds(t, ps.Problems, append(sums, "unreadable_record "+a.File.Key, "record_count "+c.File.Key)...)
	if len(ps.Deep.NotChecked) != 1 || ps.Deep.NotChecked[0].Files != 4 {
		t.Errorf("not checked %+v", ps.Deep.NotChecked)
	}
	datafiles.Put(t, f.dir, "data/t-0-100.bin", []byte("a\nb\nc\nd\n"))
	e := &ledger.Entry{Cluster: "c1", Topic: "t", TopicID: "id1", Seq: f.seq, Before: offsets.State{Next: 16},
		File: ledger.FileInfo{Key: "data/t-0-100.bin", Ranges: offsets.Ranges{{16, 20}}, Records: 4, Bytes: 8}}
	if err := f.ledger.Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	_, ps = f.scan(&DeepOptions{OffsetField: true})
	var bin bool
	for _, n := range ps.Deep.NotChecked {
		bin = bin || n.Example == "data/t-0-100.bin" && strings.Contains(n.Why, "bin") && n.Files == 1
	}
	if !bin {
		t.Errorf("not checked %+v, want the bytes file", ps.Deep.NotChecked)
	}
}

func TestScanUnknownAndForeign(t *testing.T) {
	f := newScanFixture(t)
	f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 10}}, true)
	// The topic's previous incarnation.
	f.id.TopicID = "old"
	old := f.entry(offsets.State{Next: 0}, offsets.Ranges{{100, 110}}, true)
	f.id.TopicID = "id1"
	datafiles.Put(t, f.dir, "data/t-0-9000.jsonl.zst", []byte("random bytes"))
	datafiles.Put(t, f.dir, "data/junk.bin", []byte("?"))
	datafiles.Put(t, f.dir, "data/other-0-0.jsonl", []byte("{}\n")) // a topic not configured
	datafiles.Put(t, f.dir, "data/.spillway-preflight-abc", nil)
	datafiles.Put(t, f.dir, "outside.txt", nil)
	s, ps := f.scan(nil)
	wantKinds(t, ps.Problems)
	foreign, err := s.ForeignLedgers(context.Background(), "t", "id1")
	if err != nil {
		t.Fatal(err)
	}
	wantKinds(t, foreign, "foreign_ledger data/_spillway/ledger/t/old/")
	if !strings.Contains(foreign[0].Message, "stored files it names: 1") {
		t.Errorf("foreign ledger: %s", foreign[0].Message)
	}
	wantKinds(t, s.Unknown(map[string]bool{"t": true}), "unknown_file data/t-0-9000.jsonl.zst", "unknown_file data/junk.bin")
	if s.named[old.File.Key] != true {
		t.Errorf("the old topic's file is not accounted for")
	}
}

// TestScanFileNamedTwice: with one object per key, later files overwrite
// earlier ones under the same name, as that layout promises; with any
// other template two entries naming one file is a damaged ledger.
func TestScanFileNamedTwice(t *testing.T) {
	for _, latest := range []bool{true, false} {
		f := newScanFixture(t)
		if latest {
			names, err := naming.NewNames("data/", "{{topic}}-{{partition}}-{{key}}", ".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			f.names = names
		}
		key := "data/t-0-k1.jsonl"
		f.nextKey = key
		f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 3}}, true)
		f.nextKey = key
		f.entry(offsets.State{Next: 3}, offsets.Ranges{{3, 4}}, true)
		f.nextKey = key
		f.entry(offsets.State{Next: 4}, offsets.Ranges{{4, 6}}, true)
		_, ps := f.scan(&DeepOptions{OffsetField: true})
		if latest {
			wantKinds(t, ps.Problems)
			if !reflect.DeepEqual(ps.Stored, offsets.Ranges{{0, 6}}) || ps.Files != 1 || ps.Records != 6 || ps.Deep.Records != 2 {
				t.Errorf("latest per key: stored %v, files %d, records %d, read %d", ps.Stored, ps.Files, ps.Records, ps.Deep.Records)
			}
		} else {
			wantKinds(t, ps.Problems, "ledger_inconsistent "+key, "ledger_inconsistent "+key)
		}
	}
}

// TestScanDeepTyped damages published avro and parquet files in place (same
// size): the deep scan names each, with the first record it could not
// read, and reads and checks the offsets of the others.
func TestScanDeepTyped(t *testing.T) {
	for _, typ := range []string{"avro", "parquet"} {
		t.Run(typ, func(t *testing.T) {
			f := newScanFixture(t)
			f.typ = typ
			key := func(start int) string { return fmt.Sprintf("data/t-0-%d.%s", start, typ) }
			f.nextKey = key(0)
			a := f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 1000}}, true)
			f.nextKey = key(1000)
			b := f.entry(offsets.State{Next: 1000}, offsets.Ranges{{1000, 2000}}, true)
			p := filepath.Join(f.dir, filepath.FromSlash(b.File.Key))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			datafiles.Put(t, f.dir, b.File.Key, flip(data, len(data)/2))
			_, ps := f.scan(&DeepOptions{OffsetField: true})
			wantKinds(t, ps.Problems, "unreadable_record "+b.File.Key, "checksum_mismatch "+b.File.Key)
			for _, p := range ps.Problems {
				if p.Kind == ProblemChecksumMismatch {
					continue
				}
				if p.Record == nil || *p.Record >= 1000 || !strings.Contains(p.Message, b.File.Key) {
					t.Errorf("problem %+v: want the file named and the first record that can't be read", p)
				}
				t.Logf("%s: %s", p.Kind, p.Message)
			}
			// Both files are read: a's 1000 records, and b's up to the
			// damage.
			if ps.Deep.Files != 2 || ps.Deep.Records < 1000 || ps.Deep.Records >= 2000 || len(ps.Deep.NotChecked) != 0 {
				t.Errorf("deep %+v, want %s read and checked, and %s up to the damage", ps.Deep, a.File.Key, b.File.Key)
			}
		})
	}
}

// TestScanLateZombie: resume's rule for a paused writer's file published
// late under a name the new owner entered again (ledger.ZombieFirst, see
// TestResumeZombiePublishedFirstAfterOtherFiles) holds in verify's scan
// too: the file is the earlier entry's, explained, not a size mismatch;
// and, when the new owner stored some of its offsets again, a duplicate
// naming the file to delete, as resume's error does.
func TestScanLateZombie(t *testing.T) {
	// setup writes entries 0 ([0,10)), 1 (the zombie's, [10,20), its file
	// published late), 2 (the new owner's other file, other), and 3, the
	// new owner naming entry 1's file again with runs again.
	setup := func(t *testing.T, other, again offsets.Ranges) (*scanFixture, *ledger.Entry) {
		f := newScanFixture(t)
		f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 10}}, true)
		zombie := f.entry(offsets.State{Next: 10}, offsets.Ranges{{10, 20}}, false)
		f.entry(offsets.State{Next: 10}, other, true)
		f.nextKey = zombie.File.Key
		void := f.entry(offsets.State{Next: 10, Above: other}, again, false)
		// The zombie wins the name: its file is published, the new
		// owner's commit fails.
		datafiles.Write(t, f.dir, zombie.File.Key, "jsonl", "none", 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
		if f.size(zombie.File.Key) != zombie.File.Bytes || void.File.Bytes == zombie.File.Bytes {
			t.Fatalf("sizes: zombie %d, stored %d, void %d", zombie.File.Bytes, f.size(zombie.File.Key), void.File.Bytes)
		}
		return f, zombie
	}
	t.Run("explained", func(t *testing.T) {
		f, zombie := setup(t, offsets.Ranges{{20, 30}}, offsets.Ranges{{10, 19}})
		// Resume takes the same view.
		p, err := f.ledger.Resume(context.Background(), f.id, ledger.Log{End: 40}, ledger.ResumeOptions{})
		if err != nil || p.State.Next != 30 {
			t.Fatalf("Resume = %+v, %v", p, err)
		}
		_, ps := f.scan(&DeepOptions{OffsetField: true})
		wantKinds(t, ps.Problems)
		if ps.Handled.Next != 30 || len(ps.Handled.Above) != 0 || ps.Files != 3 || ps.Records != 30 || ps.Pending != nil ||
			!reflect.DeepEqual(ps.Stored, offsets.Ranges{{0, 30}}) || len(ps.Skipped) != 0 || ps.Deep.Files != 3 || ps.Deep.Records != 30 {
			t.Errorf("scan %+v", ps)
		}
		if len(ps.Notes) != 1 || !strings.Contains(ps.Notes[0], zombie.File.Key) {
			t.Errorf("notes %q, want one naming %s", ps.Notes, zombie.File.Key)
		}
		// After a restart, the next entry starts from resume's state: the
		// void entry is no longer the last, and still explained.
		f.entry(p.State, offsets.Ranges{{30, 40}}, true)
		_, ps = f.scan(nil)
		wantKinds(t, ps.Problems)
		if ps.Handled.Next != 40 || !reflect.DeepEqual(ps.Stored, offsets.Ranges{{0, 40}}) || len(ps.Skipped) != 0 || ps.Files != 4 {
			t.Errorf("after a restart: scan %+v", ps)
		}
	})
	t.Run("overlap", func(t *testing.T) {
		f, zombie := setup(t, offsets.Ranges{{15, 30}}, offsets.Ranges{{10, 15}})
		_, err := f.ledger.Resume(context.Background(), f.id, ledger.Log{End: 40}, ledger.ResumeOptions{})
		if err == nil || !strings.Contains(err.Error(), "delete "+zombie.File.Key) {
			t.Fatalf("Resume = %v, want the file to delete", err)
		}
		_, ps := f.scan(nil)
		wantKinds(t, ps.Problems, "duplicate "+zombie.File.Key)
		if !reflect.DeepEqual(ps.Duplicates, offsets.Ranges{{15, 20}}) || ps.Problems[0].Message != err.Error() {
			t.Errorf("duplicates %v, problem %q, want resume's error %q", ps.Duplicates, ps.Problems[0].Message, err)
		}
		if !reflect.DeepEqual(ps.Stored, offsets.Ranges{{0, 30}}) || ps.Handled.Next != 30 {
			t.Errorf("stored %v handled %+v", ps.Stored, ps.Handled)
		}
	})
}
