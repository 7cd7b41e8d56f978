package iceberg

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// The table holds what was committed, and a catalog opened afresh (a
// restart) reads back where it ends from the snapshot summary alone.
func TestCommitReopenNext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := sqlOptions("kafka.events")
	c := open(t, o, dir)
	tb := openTable(t, c, "kafka.events")
	loc := tb.Location()
	if want := "file://" + dir + "/kafka.db/events"; loc != want {
		t.Fatalf("Location = %q, want %q", loc, want)
	}
	commit(t, tb,
		dataFile(t, loc, "events", 0, 0, 10, ""),
		dataFile(t, loc, "events", 1, 0, 5, ""),
	)
	commit(t, tb, dataFile(t, loc, "events", 0, 10, 25, ""))

	c2 := open(t, o, dir)
	tb2 := openTable(t, c2, "kafka.events")
	next, err := tb2.Next(testCtx(t), "events")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 25, 1: 5}; !maps.Equal(next, want) {
		t.Fatalf("Next = %v, want %v", next, want)
	}
	if other, err := tb2.Next(testCtx(t), "other"); err != nil || len(other) != 0 {
		t.Fatalf("Next(other) = %v, %v; want empty", other, err)
	}
	if n := len(dataFiles(t, tb2)); n != 3 {
		t.Fatalf("data files = %d, want 3", n)
	}
	if recs, distinct := scanCount(t, tb2); recs != 30 || distinct != 30 {
		t.Fatalf("scan: %d records, %d distinct; want 30, 30", recs, distinct)
	}
}

// A file whose offsets the table holds is skipped: a retry of a commit
// that landed, and a zombie's copy of the same range under another name.
// A file that straddles the table's end is refused, and a file past the
// end (a gap the ledger recorded) is taken and the gap noted.
func TestDuplicateSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	tb.SetWriter("instance-a")
	loc := tb.Location()
	a := dataFile(t, loc, "events", 0, 0, 10, "")
	b := dataFile(t, loc, "events", 0, 10, 20, "")
	commit(t, tb, a, b)

	zombie := dataFile(t, loc, "events", 0, 10, 20, "-zombie")
	c1 := dataFile(t, loc, "events", 0, 20, 30, "")
	commit(t, tb, a, zombie, b, c1) // a, b in already; zombie is b's range
	files := dataFiles(t, tb)
	if len(files) != 3 || slices.Contains(files, zombie.Location) {
		t.Fatalf("data files = %v, want a, b and c without the zombie's copy", files)
	}
	if recs, distinct := scanCount(t, tb); recs != 30 || distinct != 30 {
		t.Fatalf("scan: %d records, %d distinct; want 30, 30", recs, distinct)
	}

	straddle := dataFile(t, loc, "events", 0, 25, 35, "-straddle")
	err := tb.Commit(testCtx(t), []File{straddle})
	if err == nil || !strings.Contains(err.Error(), "duplicating [25, 30)") {
		t.Fatalf("Commit(straddling file) = %v, want a refusal naming [25, 30)", err)
	}

	gap := dataFile(t, loc, "events", 0, 40, 45, "")
	commit(t, tb, gap)
	snap := tb.tbl.CurrentSnapshot()
	props := snap.Summary.Properties
	var offs map[string]map[string]int64
	if err := json.Unmarshal([]byte(props[PropOffsets]), &offs); err != nil {
		t.Fatalf("%s = %q: %v", PropOffsets, props[PropOffsets], err)
	}
	if offs["events"]["0"] != 45 {
		t.Fatalf("%s = %s, want events/0 at 45", PropOffsets, props[PropOffsets])
	}
	if got := props[PropGaps]; got != `{"events":{"0":[[30,40]]}}` {
		t.Fatalf("%s = %q, want the gap [30, 40)", PropGaps, got)
	}
	if got := props[PropWriter]; got != "instance-a" {
		t.Fatalf("%s = %q", PropWriter, got)
	}
	if n := len(dataFiles(t, tb)); n != 4 {
		t.Fatalf("data files = %d, want 4", n)
	}
}

// Two instances commit to one table. The second loses the race
// deterministically: the first commits (the same file and one more) after
// the second has planned. The second's catalog commit then conflicts; it
// reloads, skips the file the first added, and adds only its own.
func TestConflictReloadsAndSkips(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := sqlOptions("kafka.events")
	ca, cb := open(t, o, dir), open(t, o, dir)
	ta, tb := openTable(t, ca, "kafka.events"), openTable(t, cb, "kafka.events")
	loc := ta.Location()
	f0 := dataFile(t, loc, "events", 0, 0, 10, "")
	commit(t, ta, f0) // the table exists from here on

	shared := dataFile(t, loc, "events", 1, 0, 10, "")
	sharedZombie := dataFile(t, loc, "events", 1, 0, 10, "-zombie")
	own := dataFile(t, loc, "events", 2, 0, 7, "")
	other := dataFile(t, loc, "events", 0, 10, 20, "")
	attempts := 0
	tb.beforeCommit = func() {
		attempts++
		if attempts == 1 {
			commit(t, ta, shared, other)
		}
	}
	commit(t, tb, sharedZombie, own)
	if attempts < 2 {
		t.Fatalf("attempts = %d: the commit never conflicted, the test proves nothing", attempts)
	}
	fenced(t, dataFiles(t, ta), ta, f0, other, shared, own)
}

// fenced checks the table after a zombie's commit lost to another
// writer's: exactly the files each range's first committer wrote, the
// ends those ranges give, and every record once.
func fenced(t *testing.T, files []string, tb *Table, want ...File) {
	t.Helper()
	slices.Sort(files)
	var locs []string
	for _, f := range want {
		locs = append(locs, f.Location)
	}
	slices.Sort(locs)
	if !slices.Equal(files, locs) {
		t.Fatalf("data files = %v, want %v", files, locs)
	}
	next, err := tb.Next(testCtx(t), "events")
	if err != nil {
		t.Fatal(err)
	}
	if w := map[int32]int64{0: 20, 1: 10, 2: 7}; !maps.Equal(next, w) {
		t.Fatalf("Next = %v, want %v", next, w)
	}
	if recs, distinct := scanCount(t, tb); recs != 37 || distinct != 37 {
		t.Fatalf("scan: %d records, %d distinct; want 37, 37", recs, distinct)
	}
}

// Two instances commit overlapping sets of files at the same time, on a
// table neither has created: both succeed, and no range is in twice.
func TestConcurrentInstances(t *testing.T) {
	t.Parallel()
	concurrentInstances(t, sqlOptions("kafka.events"), 4, 5)
}

// concurrentInstances has two instances commit every range of parts
// partitions, perPart files each, on a table of o neither has created,
// each its own copy, in several commits as commit loops make them: both
// succeed, and no range is in twice.
func concurrentInstances(t *testing.T, o Options, parts, perPart int) {
	t.Helper()
	dir := t.TempDir()
	loc := open(t, o, dir).Location("kafka.events")
	var mine, theirs []File // each instance's copy of every file: a zombie's and the owner's
	for p := range int32(parts) {
		for i := range int64(perPart) {
			mine = append(mine, dataFile(t, loc, "events", p, i*10, i*10+10, "-a"))
			theirs = append(theirs, dataFile(t, loc, "events", p, i*10, i*10+10, "-b"))
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, files := range [][]File{mine, theirs} {
		c := open(t, o, dir)
		tb := openTable(t, c, "kafka.events")
		wg.Go(func() {
			// In several commits, as a commit loop makes them.
			for j := 0; j < len(files); j += perPart {
				if err := tb.Commit(testCtx(t), files[j:j+perPart]); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	tb := openTable(t, open(t, o, dir), "kafka.events")
	if n := len(dataFiles(t, tb)); n != parts*perPart {
		t.Fatalf("data files = %d, want %d", n, parts*perPart)
	}
	if recs, distinct := scanCount(t, tb); recs != parts*perPart*10 || distinct != recs {
		t.Fatalf("scan: %d records, %d distinct; want %d of each", recs, distinct, parts*perPart*10)
	}
}

// A file that gains an optional field adds the column; a type change, or
// a new field with evolve_schema off, stops the commit naming the field.
func TestSchemaEvolution(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	loc := tb.Location()
	commit(t, tb, dataFile(t, loc, "events", 0, 0, 10, ""))

	extra := "x"
	v2 := make([]rowV2, 0, 10)
	for o := int64(10); o < 20; o++ {
		v2 = append(v2, rowV2{Partition: 0, Offset: o, Timestamp: ts(o), Extra: &extra})
	}
	commit(t, tb, fileOf(t, loc, "events", 0, 10, 20, "", v2))
	f, ok := tb.tbl.Schema().FindFieldByName("extra")
	if !ok || f.ID != 6 || f.Required {
		t.Fatalf("table schema %s: want optional extra with id 6", tb.tbl.Schema())
	}
	if recs, _ := scanCount(t, tb); recs != 20 {
		t.Fatalf("scan: %d records, want 20", recs)
	}

	bad := []rowBadType{{Partition: 0, Offset: "20", Timestamp: ts(20)}}
	err := tb.Commit(testCtx(t), []File{fileOf(t, loc, "events", 0, 20, 21, "", bad)})
	if err == nil || !strings.Contains(err.Error(), `field "offset" changes type`) {
		t.Fatalf("Commit(offset as string) = %v, want an error naming offset", err)
	}

	o := sqlOptions("kafka.fixed")
	o.EvolveSchema = false
	fixed := openTable(t, open(t, o, dir), "kafka.fixed")
	commit(t, fixed, dataFile(t, fixed.Location(), "events", 0, 0, 10, ""))
	err = fixed.Commit(testCtx(t), []File{fileOf(t, fixed.Location(), "events", 0, 10, 20, "", v2)})
	if err == nil || !strings.Contains(err.Error(), "adds the fields extra and iceberg.evolve_schema is false") {
		t.Fatalf("Commit(new field, evolve_schema false) = %v", err)
	}
}

// A file without Iceberg field ids is refused before the table exists.
func TestFileWithoutFieldIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	rows := []rowNoIDs{{Partition: 0, Offset: 0, Timestamp: ts(0)}}
	err := tb.Commit(testCtx(t), []File{fileOf(t, tb.Location(), "events", 0, 0, 1, "", rows)})
	if err == nil || !strings.Contains(err.Error(), `column "partition" has no Iceberg field id`) {
		t.Fatalf("Commit(file without ids) = %v", err)
	}
	if tb.exists() {
		t.Fatal("the table was created from a file without field ids")
	}
}

// Without auto_create a missing table is an error naming the key.
func TestNoAutoCreate(t *testing.T) {
	t.Parallel()
	o := sqlOptions("kafka.events")
	o.AutoCreate = false
	c := open(t, o, t.TempDir())
	_, err := c.Table(testCtx(t), "kafka.events")
	if err == nil || !strings.Contains(err.Error(), "iceberg.auto_create is false") {
		t.Fatalf("Table = %v", err)
	}
}

// rowMillis has its timestamp in milliseconds, as Spillway's plain-file
// writer keeps it.
type rowMillis struct {
	Partition int32 `parquet:"partition,id(1)"`
	Offset    int64 `parquet:"offset,id(2)"`
	Timestamp int64 `parquet:"timestamp,id(3),timestamp(millisecond:utc)"`
}

// A millisecond timestamp is refused, naming the column: its bounds would
// be read as microseconds.
func TestMillisecondTimestampRefused(t *testing.T) {
	t.Parallel()
	tb := openTable(t, open(t, sqlOptions("kafka.events"), t.TempDir()), "kafka.events")
	rows := []rowMillis{{Partition: 0, Offset: 0, Timestamp: day0.UnixMilli()}}
	err := tb.Commit(testCtx(t), []File{fileOf(t, tb.Location(), "events", 0, 0, 1, "", rows)})
	if err == nil || !strings.Contains(err.Error(), `column "timestamp" is a time or timestamp in milliseconds`) {
		t.Fatalf("Commit(millisecond timestamps) = %v", err)
	}
}

// rowOwnIDs numbers its fields other than a new table would.
type rowOwnIDs struct {
	Partition int32 `parquet:"partition,id(10)"`
	Offset    int64 `parquet:"offset,id(11)"`
}

// rowHashedIDs has ids as Spillway's writer gives registry-typed columns
// (hashed from their paths), and a new optional one.
type rowHashedIDs struct {
	Partition int32   `parquet:"partition,id(10)"`
	Offset    int64   `parquet:"offset,id(11)"`
	Extra     *string `parquet:"extra,id(5000),optional"`
}

// rowOtherID numbers offset otherwise.
type rowOtherID struct {
	Partition int32 `parquet:"partition,id(10)"`
	Offset    int64 `parquet:"offset,id(12)"`
}

// The table keeps the files' field ids, which a new table would renumber
// (1..n): at creation, and when a file adds a field with an id of its
// own. A file that numbers a field otherwise is refused, naming it.
func TestTableKeepsTheFilesIDs(t *testing.T) {
	t.Parallel()
	tb := openTable(t, open(t, sqlOptions("kafka.events"), t.TempDir()), "kafka.events")
	commit(t, tb, fileOf(t, tb.Location(), "events", 0, 0, 1, "", []rowOwnIDs{{}}))
	ids := func() map[string]int {
		idx, err := iceberg.IndexByName(tb.tbl.Schema())
		if err != nil {
			t.Fatal(err)
		}
		return idx
	}
	if got, want := ids(), map[string]int{"partition": 10, "offset": 11}; !maps.Equal(got, want) {
		t.Fatalf("table ids = %v, want the file's %v", got, want)
	}
	commit(t, tb, fileOf(t, tb.Location(), "events", 0, 1, 2, "", []rowHashedIDs{{Offset: 1}}))
	if got, want := ids(), map[string]int{"partition": 10, "offset": 11, "extra": 5000}; !maps.Equal(got, want) {
		t.Fatalf("table ids after evolution = %v, want the files' %v", got, want)
	}
	if recs, _ := scanCount(t, tb); recs != 2 {
		t.Fatalf("scan: %d records, want 2", recs)
	}
	err := tb.Commit(testCtx(t), []File{fileOf(t, tb.Location(), "events", 0, 2, 3, "", []rowOtherID{{Offset: 2}})})
	if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `"offset"`) {
		t.Fatalf("Commit(file numbering offset 12) = %v, want a refusal naming offset", err)
	}
}

// Many small commits do not pile up one manifest each: the tables
// Spillway creates merge them.
func TestManifestsMerge(t *testing.T) {
	t.Parallel()
	tb := openTable(t, open(t, sqlOptions("kafka.events"), t.TempDir()), "kafka.events")
	loc := tb.Location()
	commit(t, tb, dataFile(t, loc, "events", 0, 0, 1, ""))
	// A low merge threshold keeps the test short; the default is 100.
	tx := tb.tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{table.ManifestMinMergeCountKey: "4"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	const commits = 12
	for i := int64(1); i < commits; i++ {
		commit(t, tb, dataFile(t, loc, "events", 0, i, i+1, ""))
	}
	fs, err := tb.tbl.FS(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := tb.tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) >= 4 {
		t.Fatalf("%d manifests after %d commits, want fewer than 4", len(ms), commits)
	}
	if n := len(dataFiles(t, tb)); n != commits {
		t.Fatalf("data files = %d, want %d", n, commits)
	}
}

// A file whose record count is not its ledger entry's is refused: the
// entry names another file, or the file was replaced.
func TestRecordCountMismatchRefused(t *testing.T) {
	t.Parallel()
	tb := openTable(t, open(t, sqlOptions("kafka.events"), t.TempDir()), "kafka.events")
	f := dataFile(t, tb.Location(), "events", 0, 0, 10, "")
	f.Records = 9
	err := tb.Commit(testCtx(t), []File{f})
	if err == nil || !strings.Contains(err.Error(), "holds 10 records, but its ledger entry says 9") {
		t.Fatalf("Commit(wrong count) = %v", err)
	}
}

// Files of a partition split by day may share their End (the handled
// offset before and after a file whose lowest offset is left to another
// day's open file): held or not is the ledger seq's to say, so the second
// one, committed in a later snapshot, is added, and committed again, is
// skipped.
func TestSameEndBySeq(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	loc := tb.Location()
	rows := func(offs ...int64) []row {
		var out []row
		for _, o := range offs {
			out = append(out, row{Partition: 0, Offset: o, Timestamp: ts(o), Value: []byte(fmt.Sprint("v", o))})
		}
		return out
	}
	// Day 1 holds 0..4 and 7; day 2 holds 5 and 6, then 8 and 9.
	a := fileOf(t, loc, "events", 0, 0, 7, "-a", rows(0, 1, 2, 3, 4))
	a.Seq = 0
	b := fileOf(t, loc, "events", 0, 7, 7, "-b", rows(8, 9))
	b.Seq = 1
	commit(t, tb, a)
	commit(t, tb, b)
	commit(t, tb, a, b) // a retry after a crash: both held
	files := dataFiles(t, tb)
	slices.Sort(files)
	want := []string{a.Location, b.Location}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Fatalf("data files = %v, want %v", files, want)
	}
	if recs, distinct := scanCount(t, tb); recs != 7 || distinct != 7 {
		t.Fatalf("scan: %d records, %d distinct; want 7, 7", recs, distinct)
	}
	held, err := tb.Held(testCtx(t), "events")
	if err != nil {
		t.Fatal(err)
	}
	if w := map[int32]int64{0: 1}; !maps.Equal(held, w) {
		t.Fatalf("Held = %v, want %v", held, w)
	}
}

// A data file that can't be read (here: not there) while the table is
// created from it is storage's failure, retried by the commit loop, not a
// refusal, which would stop it for good.
func TestUnreadableFileIsNotRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	f := dataFile(t, tb.Location(), "events", 0, 0, 10, "")
	f.Location += ".gone"
	err := tb.Commit(testCtx(t), []File{f})
	if err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("Commit(missing file) = %v, want an error that is not ErrRefused", err)
	}
	if tb.exists() {
		t.Fatal("the table was created from a file that can't be read")
	}
}
