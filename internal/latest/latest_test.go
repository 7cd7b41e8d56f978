package latest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup is a writer on a real local directory with the real jsonl encoder,
// fields value only, so each object holds the value's JSON.
func setup(t *testing.T, limit int64, mod func(*Config)) (*Writer, string, *budget.Budget) {
	t.Helper()
	dir := t.TempDir()
	b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	tpl, err := naming.Parse("{{topic}}/{{partition}}/{{key}}")
	if err != nil {
		t.Fatal(err)
	}
	fcfg := config.Default().Format
	fcfg.Fields = []string{"value"}
	fcfg.Envelope = false
	cfg := Config{
		Template: tpl, Prefix: "out/", Extension: ".json", Concurrency: 4,
		NewEncoder:    func(w io.Writer) (format.Encoder, error) { return formats.NewEncoder(fcfg, w) },
		NewCompressor: func(w io.Writer) (io.WriteCloser, error) { return format.NewCompressor("none", w) },
		ErrRecord:     format.ErrRecord,
		NullValues:    "write",
		Policy:        errpolicy.Policy{Tolerance: "none", Log: slog.New(slog.DiscardHandler)},
	}
	if mod != nil {
		mod(&cfg)
	}
	bud := budget.New(limit, 0)
	w := New(cfg, b, bud, slog.New(slog.DiscardHandler))
	t.Cleanup(w.Close)
	return w, filepath.Join(dir, "out"), bud
}

func rec(p int32, off int64, key, value string) *kgo.Record {
	return &kgo.Record{Topic: "t", Partition: p, Offset: off, Key: []byte(key), Value: []byte(value)}
}

// objects reads every stored object: name relative to out/ -> content.
func objects(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		got[filepath.ToSlash(rel)] = strings.TrimSpace(string(b))
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return got
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// TestLatestValueWins: one object per key, holding the key's last record;
// offsets become committable only once the flush stored every object.
func TestLatestValueWins(t *testing.T) {
	w, dir, bud := setup(t, 64<<20, nil)
	c := ctx(t)
	recs := []*kgo.Record{
		rec(0, 0, "a", `1`), rec(0, 1, "b", `2`), rec(0, 2, "a", `3`),
		rec(1, 7, "a", `"p1"`), rec(0, 3, "c/d", `4`),
	}
	if err := w.Write(c, recs); err != nil {
		t.Fatal(err)
	}
	if got := w.Committable(nil); len(got) != 0 {
		t.Fatalf("committable before any flush: %v", got)
	}
	if got := objects(t, dir); len(got) != 0 {
		t.Fatalf("stored before any flush: %v", got)
	}
	if err := w.Flush(c, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"t/0/a.json": "3", "t/0/b.json": "2", "t/0/c!2Fd.json": "4", "t/1/a.json": `"p1"`}
	if got := objects(t, dir); !maps.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	wantOff := map[offsets.TopicPartition]int64{{Topic: "t", Partition: 0}: 4, {Topic: "t", Partition: 1}: 8}
	if got := w.Committable(nil); !maps.Equal(got, wantOff) {
		t.Fatalf("committable %v, want %v", got, wantOff)
	}
	if got := w.Committable(nil); len(got) != 0 {
		t.Fatalf("committable popped twice: %v", got)
	}
	// A later value replaces the object; a replay of the same records
	// leaves storage as it was.
	if err := w.Write(c, []*kgo.Record{rec(0, 4, "a", `5`), rec(0, 5, "b", `2`)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(c, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	want["t/0/a.json"] = "5"
	if got := objects(t, dir); !maps.Equal(got, want) {
		t.Fatalf("after the second flush: %v, want %v", got, want)
	}
	if u := bud.Snapshot(); u.Used != 0 {
		t.Fatalf("budget holds %d bytes after every object was stored: %+v", u.Used, u)
	}
}

// TestPressureFlushes: when the held objects fill the budget, WriteSome
// stops early and a flush starts, which frees the budget; no record is
// lost and the offsets become committable.
func TestPressureFlushes(t *testing.T) {
	w, dir, bud := setup(t, 64<<10, nil)
	c := ctx(t)
	val := `"` + strings.Repeat("x", 1000) + `"`
	var recs []*kgo.Record
	for i := range 400 {
		recs = append(recs, rec(0, int64(i), fmt.Sprintf("k%04d", i), val))
	}
	early := false
	for len(recs) > 0 {
		n, err := w.WriteSome(c, recs)
		if err != nil {
			t.Fatal(err)
		}
		if n < len(recs) {
			early = true
			if err := bud.Wait(c, nil); err != nil {
				t.Fatal(err)
			}
		}
		recs = recs[n:]
	}
	if !early {
		t.Fatal("400 KiB of objects in a 64 KiB budget never stopped WriteSome")
	}
	if err := w.Flush(c, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	if got := len(objects(t, dir)); got != 400 {
		t.Fatalf("stored %d objects, want 400", got)
	}
	if got := w.Committable(nil)[offsets.TopicPartition{Topic: "t"}]; got != 400 {
		t.Fatalf("committable %d, want 400", got)
	}
	if st := w.Stats(); st.Closed[offsets.ReasonPressure] == 0 {
		t.Fatalf("no flush counted for pressure: %+v", st.Closed)
	}
}

// TestRecordErrorPolicy: a value the format refuses stops the run by
// default, naming the record; with tolerance all it is skipped and its
// offset still committed after the flush.
func TestRecordErrorPolicy(t *testing.T) {
	w, _, _ := setup(t, 64<<20, nil)
	err := w.Write(ctx(t), []*kgo.Record{rec(0, 0, "a", `1`), rec(0, 1, "a", "\xff\xfe")})
	if err == nil || !strings.Contains(err.Error(), "t/0@1") || !strings.Contains(err.Error(), "errors.tolerance") {
		t.Fatalf("err = %v, want the record named and the setting to change", err)
	}
	if w.Err() == nil {
		t.Fatal("the error is not kept: a later Write would go on")
	}

	w, dir, _ := setup(t, 64<<20, func(c *Config) { c.Policy.Tolerance = "all" })
	c := ctx(t)
	if err := w.Write(c, []*kgo.Record{rec(0, 0, "a", `1`), rec(0, 1, "a", "\xff\xfe")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(c, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	if got := objects(t, dir); !maps.Equal(got, map[string]string{"t/0/a.json": "1"}) {
		t.Fatalf("stored %v", got)
	}
	if got := w.Committable(nil)[offsets.TopicPartition{Topic: "t"}]; got != 2 {
		t.Fatalf("committable %d, want 2 (the skipped record is handled)", got)
	}
}

// failingStore fails every Replace: a storage error must leave every
// offset uncommitted. A real bucket can't be made to fail on demand here;
// the fault-injecting storage tests cover the real backends' retries.
type failingStore struct{ calls int }

func (f *failingStore) ReplaceOwned(context.Context, string, string, []byte, map[string]string) error {
	f.calls++
	return errors.New("injected: bucket unreachable")
}

func (f *failingStore) RemoveAbandonedOwned(context.Context, string, []string) error { return nil }

func TestStorageErrorCommitsNothing(t *testing.T) {
	tpl, _ := naming.Parse("{{key}}")
	fcfg := config.Default().Format
	st := &failingStore{}
	w := New(Config{
		Template: tpl, Extension: ".jsonl",
		NewEncoder:    func(wr io.Writer) (format.Encoder, error) { return formats.NewEncoder(fcfg, wr) },
		NewCompressor: func(wr io.Writer) (io.WriteCloser, error) { return format.NewCompressor("none", wr) },
	}, st, budget.New(64<<20, 0), slog.New(slog.DiscardHandler))
	defer w.Close()
	c := ctx(t)
	if err := w.Write(c, []*kgo.Record{rec(0, 0, "a", `1`), rec(0, 1, "b", `2`)}); err != nil {
		t.Fatal(err)
	}
	err := w.Flush(c, nil, offsets.ReasonShutdown)
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Flush err = %v, want the storage error", err)
	}
	if got := w.Committable(nil); len(got) != 0 {
		t.Fatalf("committable after a failed flush: %v", got)
	}
	if w.Write(c, []*kgo.Record{rec(0, 2, "a", `3`)}) == nil {
		t.Fatal("Write after a failed flush was accepted")
	}
}

// TestDropLetsGo: a dropped partition's held objects are not stored, and a
// flush doesn't make its offsets committable; other partitions go on.
func TestDropLetsGo(t *testing.T) {
	w, dir, _ := setup(t, 64<<20, nil)
	c := ctx(t)
	if err := w.Write(c, []*kgo.Record{rec(0, 0, "a", `1`), rec(1, 0, "b", `2`)}); err != nil {
		t.Fatal(err)
	}
	w.Drop(map[offsets.TopicPartition]bool{{Topic: "t", Partition: 1}: true})
	if err := w.Flush(c, nil, offsets.ReasonRevoke); err != nil {
		t.Fatal(err)
	}
	if got := objects(t, dir); !maps.Equal(got, map[string]string{"t/0/a.json": "1"}) {
		t.Fatalf("stored %v", got)
	}
	got := w.Committable(nil)
	if len(got) != 1 || got[offsets.TopicPartition{Topic: "t"}] != 1 {
		t.Fatalf("committable %v, want only t/0 at 1", got)
	}
}

// TestAgeFlush: Tick flushes once the oldest held object waited max_age,
// and Durable wakes the committer.
func TestAgeFlush(t *testing.T) {
	w, dir, _ := setup(t, 64<<20, func(c *Config) { c.MaxAge = time.Minute })
	c := ctx(t)
	if err := w.Write(c, []*kgo.Record{rec(0, 0, "a", `1`)}); err != nil {
		t.Fatal(err)
	}
	wake := w.Durable()
	if err := w.Tick(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Fatal("flushed before max_age")
	default:
	}
	if err := w.Tick(c, time.Now().Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-c.Done():
		t.Fatal("no flush after max_age")
	}
	if got := objects(t, dir); len(got) != 1 {
		t.Fatalf("stored %v", got)
	}
	if w.Stats().Closed[offsets.ReasonAge] != 1 {
		t.Fatalf("closed by reason: %v", w.Stats().Closed)
	}
}

// TestConcurrentWritesAndFlushes: the poll loop, the ticker and a revoke
// all reach the writer at once (run with -race); the last value of every
// key is what ends in storage.
func TestConcurrentWritesAndFlushes(t *testing.T) {
	w, dir, _ := setup(t, 256<<10, func(c *Config) { c.MaxAge = time.Nanosecond })
	c := ctx(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = w.Tick(c, time.Now())
			_ = w.Flush(c, nil, offsets.ReasonRevoke)
		}
	}()
	last := map[string]string{}
	for i := range 3000 {
		k := fmt.Sprintf("k%d", i%37)
		v := strconv.Itoa(i)
		last["t/0/"+k+".json"] = v
		if err := w.Write(c, []*kgo.Record{rec(0, int64(i), k, v)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := w.Flush(c, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	got := objects(t, dir)
	for k, v := range last {
		if got[k] != v {
			t.Fatalf("%s holds %q, want the last value %q", k, got[k], v)
		}
	}
}

// TestFirstFlushRemovesDeadWritersTemps: with a template that doesn't name
// the partition, the first flush of a partition's new owner removes the
// temp file a writer of that partition left when it died mid-write (a
// kill -9), and leaves a live writer's temp file of another partition in
// the same directory, and its own. Three buckets on one directory stand
// for three processes: the dead one's writer is never committed, the live
// one's is committed after the flush.
func TestFirstFlushRemovesDeadWritersTemps(t *testing.T) {
	root := t.TempDir()
	proc := func() *storage.Bucket {
		b, err := storage.Open(context.Background(), "file://"+root, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	dead, live := proc(), proc()
	c := ctx(t)
	start := func(b *storage.Bucket, key, owner string) *storage.Writer {
		wr, err := b.NewReplacingWriter(c, key, owner, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wr.Write([]byte("unfinished\n")); err != nil {
			t.Fatal(err)
		}
		return wr
	}
	deadW := start(dead, "out/x.json", "t/1")
	t.Cleanup(deadW.Abort)
	liveW := start(live, "out/y.json", "t/2")
	temps := func() []string {
		var out []string
		ents, err := os.ReadDir(filepath.Join(root, "out"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	if n := len(temps()); n != 2 {
		t.Fatalf("%d temp files before the flush, want the dead and the live writer's: %v", n, temps())
	}

	tpl, err := naming.Parse("{{key}}")
	if err != nil {
		t.Fatal(err)
	}
	fcfg := config.Default().Format
	fcfg.Fields, fcfg.Envelope = []string{"value"}, false
	w := New(Config{
		Template: tpl, Prefix: "out/", Extension: ".json", Concurrency: 2,
		NewEncoder:    func(wr io.Writer) (format.Encoder, error) { return formats.NewEncoder(fcfg, wr) },
		NewCompressor: func(wr io.Writer) (io.WriteCloser, error) { return format.NewCompressor("none", wr) },
		ErrRecord:     format.ErrRecord,
		NullValues:    "write",
		Policy:        errpolicy.Policy{Tolerance: "none", Log: slog.New(slog.DiscardHandler)},
	}, proc(), budget.New(64<<20, 0), slog.New(slog.DiscardHandler))
	t.Cleanup(w.Close)
	if err := w.Write(c, []*kgo.Record{rec(1, 0, "a", `1`)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(c, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	// One left, and it is the live writer's: its commit needs it.
	if left := temps(); len(left) != 1 {
		t.Fatalf("temp files after the new owner's flush: %v, want only the live writer's", left)
	}
	if err := liveW.Commit(); err != nil {
		t.Fatalf("the live writer of partition 2 lost its temp file: %v", err)
	}
	if got := objects(t, filepath.Join(root, "out")); !maps.Equal(got, map[string]string{"a.json": "1", "y.json": "unfinished"}) {
		t.Fatalf("stored %v", got)
	}
	if left := temps(); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}
