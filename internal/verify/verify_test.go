package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/audit"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	group  = "verify-test"
	prefix = "data/"
)

// fixture is a topic of two partitions of 1,000 records each, drained by
// the real pipeline into a local directory in files of 250 records, and
// committed to the end.
type fixture struct {
	cl    *kgo.Client
	adm   *kadm.Client
	dir   string
	names naming.Names
	ends  map[int32]int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 2_000, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	f := &fixture{cl: cl, adm: kadm.NewClient(cl), dir: t.TempDir(), ends: testkit.EndOffsets(t, cl, "events")}
	cfg := config.Default()
	cfg.Kafka.Brokers = cluster.Addrs()
	cfg.Kafka.Group = group
	cfg.Kafka.Topics = []string{"events"}
	cfg.Storage.URL = "file://" + f.dir
	cfg.Storage.Prefix = prefix
	// Files end on their record count alone, so their names are known.
	cfg.File.MaxRecords = 250
	cfg.File.MaxAge = time.Hour
	cfg.Format.Compression = "none"
	cfg.Backpressure.MemoryLimit = "128MiB"
	cfg.Admin.Listen = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.names, err = naming.NewNames(prefix, cfg.File.NameTemplate, naming.Extension(cfg.Format.Type, cfg.Format.Compression)); err != nil {
		t.Fatal(err)
	}
	testkit.RunUntilCommitted(t, cl, group, "events", f.ends, func(ctx context.Context) error {
		return runner.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), runner.Options{})
	})
	return f
}

// copyOf copies the stored tree, so that a test can damage it alone.
func (f *fixture) copyOf(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(f.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(f.dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// tree lists every file under dir with its size and contents' length,
// dot files included.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// check verifies the tree under dir, and that verifying changed nothing
// in it.
func (f *fixture) check(t *testing.T, dir string, deep bool) Report {
	t.Helper()
	ctx := context.Background()
	b, err := storage.Open(ctx, "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	before := tree(t, dir)
	opts := Options{Names: f.names}
	if deep {
		opts.Deep = &audit.DeepOptions{OffsetField: true}
	}
	r, err := Run(ctx, b, f.adm, group, []string{"events"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if after := tree(t, dir); !maps.Equal(before, after) {
		t.Errorf("verify changed storage: %d files before, %d after", len(before), len(after))
	}
	// The JSON form is the one scripts read: it must round-trip.
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil || back.OK != r.OK || len(back.Partitions) != len(r.Partitions) {
		t.Fatalf("the JSON report doesn't read back: %v", err)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("report:\n%s", text.String())
	}
	return r
}

func (f *fixture) id(t *testing.T, p int32) ledger.Identity {
	t.Helper()
	k, err := ReadKafka(context.Background(), f.adm, group, []string{"events"})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Identity{Cluster: k.Cluster, Topic: "events", TopicID: k.TopicIDs["events"], Partition: p}
}

// problems lists "partition kind key" for every problem, sorted; the
// partition is -1 for the prefix's own.
func problems(r Report) []string {
	var out []string
	for _, p := range r.Partitions {
		for _, q := range p.Problems {
			out = append(out, strings.TrimSpace(fmt.Sprintf("%d %s %s", p.Partition, q.Kind, q.Key)))
		}
	}
	for _, q := range r.Problems {
		out = append(out, strings.TrimSpace(fmt.Sprintf("-1 %s %s", q.Kind, q.Key)))
	}
	sort.Strings(out)
	return out
}

func wantProblems(t *testing.T, r Report, want ...string) {
	t.Helper()
	sort.Strings(want)
	got := problems(r)
	if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
		var text strings.Builder
		_ = r.WriteText(&text)
		t.Errorf("problems:\n  %s\nwant:\n  %s\nreport:\n%s", strings.Join(got, "\n  "), strings.Join(want, "\n  "), text.String())
	}
	if r.OK != (len(want) == 0) {
		t.Errorf("report ok = %v with %d problems", r.OK, len(want))
	}
}

func (f *fixture) partition(t *testing.T, r Report, p int32) PartitionReport {
	t.Helper()
	for _, pr := range r.Partitions {
		if pr.Partition == p {
			return pr
		}
	}
	t.Fatalf("no partition %d in the report", p)
	return PartitionReport{}
}

func writeAt(t *testing.T, dir, key string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, dir, key string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func removeAt(t *testing.T, dir, key string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(key))); err != nil {
		t.Fatal(err)
	}
}

// TestVerify checks a drained topic, then the same storage damaged in
// each way verify must report: every problem names its file, and verify
// changes nothing.
func TestVerify(t *testing.T) {
	f := newFixture(t)

	t.Run("clean", func(t *testing.T) {
		dir := f.copyOf(t)
		// A temp file a dead writer left: verify doesn't remove it (the
		// resume path does, as the partition's owner).
		writeAt(t, dir, prefix+".spillway-tmp-events-0-1000.jsonl.123", []byte("partial"))
		for _, deep := range []bool{false, true} {
			r := f.check(t, dir, deep)
			wantProblems(t, r)
			if len(r.Partitions) != 2 || r.Cluster == "" || r.Deep != deep {
				t.Fatalf("report %+v", r)
			}
			for _, p := range r.Partitions {
				if p.Files != 4 || p.Records != 1000 || p.LedgerEntries != 4 || p.LedgerStart != 0 || p.Handled != 1000 ||
					p.Committed != 1000 || p.End != 1000 || !reflect.DeepEqual(p.Ranges, offsets.Ranges{{0, 1000}}) ||
					len(p.Gaps)+len(p.Skipped)+len(p.DuplicateRanges) != 0 || p.TopicID == "" {
					t.Errorf("partition %+v", p)
				}
				if deep && (p.Deep == nil || p.Deep.Files != 4 || p.Deep.Records != 1000 || len(p.Deep.NotChecked) != 0) {
					t.Errorf("deep %+v", p.Deep)
				}
			}
		}
	})

	t.Run("file deleted", func(t *testing.T) {
		dir := f.copyOf(t)
		removeAt(t, dir, prefix+"events-1-500.jsonl")
		r := f.check(t, dir, false)
		wantProblems(t, r, "1 file_missing data/events-1-500.jsonl", "1 gap")
		if p := f.partition(t, r, 1); !reflect.DeepEqual(p.Gaps, offsets.Ranges{{500, 750}}) {
			t.Errorf("gaps %v", p.Gaps)
		}
	})

	t.Run("head file deleted", func(t *testing.T) {
		dir := f.copyOf(t)
		removeAt(t, dir, prefix+"events-0-750.jsonl")
		r := f.check(t, dir, false)
		wantProblems(t, r, "0 head_missing data/events-0-750.jsonl", "0 committed_past_ledger", "0 gap")
		if p := f.partition(t, r, 0); !reflect.DeepEqual(p.Gaps, offsets.Ranges{{750, 1000}}) || p.Handled != 750 {
			t.Errorf("gaps %v, handled %d", p.Gaps, p.Handled)
		}
	})

	t.Run("file truncated", func(t *testing.T) {
		dir := f.copyOf(t)
		data := readAt(t, dir, prefix+"events-0-250.jsonl")
		writeAt(t, dir, prefix+"events-0-250.jsonl", data[:len(data)/2])
		r := f.check(t, dir, true)
		wantProblems(t, r, "0 size_mismatch data/events-0-250.jsonl", "0 gap")
	})

	t.Run("foreign files", func(t *testing.T) {
		dir := f.copyOf(t)
		writeAt(t, dir, prefix+"events-0-9000.jsonl.zst", []byte("random bytes, not zstd"))
		writeAt(t, dir, prefix+"notes.txt", []byte("hello"))
		// Outside the prefix: not verify's business.
		writeAt(t, dir, "elsewhere.txt", []byte("hello"))
		r := f.check(t, dir, false)
		wantProblems(t, r, "-1 unknown_file data/events-0-9000.jsonl.zst", "-1 unknown_file data/notes.txt")
	})

	t.Run("corrupt ledger entry", func(t *testing.T) {
		dir := f.copyOf(t)
		key := ledger.New(nil, prefix).EntryKey(f.id(t, 0), 1)
		data := readAt(t, dir, key)
		writeAt(t, dir, key, data[:len(data)-10])
		r := f.check(t, dir, false)
		// Its file is named by nothing readable now.
		wantProblems(t, r, "0 corrupt_entry "+key, "0 gap", "-1 unknown_file data/events-0-250.jsonl")
	})

	t.Run("duplicate file", func(t *testing.T) {
		dir := f.copyOf(t)
		b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		// A second file claiming offsets 250-499, with its own ledger
		// entry (valid on its own: its state before it is an older one,
		// as a second writer that raced the first would have written):
		// two published files hold them.
		data := readAt(t, dir, prefix+"events-0-250.jsonl")
		writeAt(t, dir, prefix+"events-0-250-copy.jsonl", data)
		id := f.id(t, 0)
		e := &ledger.Entry{Cluster: id.Cluster, Topic: id.Topic, TopicID: id.TopicID, Partition: 0, Seq: 4,
			Before: offsets.State{Next: 250},
			File:   ledger.FileInfo{Key: prefix + "events-0-250-copy.jsonl", Ranges: offsets.Ranges{{250, 500}}, Records: 250, Bytes: int64(len(data))}}
		if err := ledger.New(b, prefix).Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		r := f.check(t, dir, true)
		// The racing entry's older state also makes the file after it look
		// published late, and the commit look ahead of the ledger.
		wantProblems(t, r, "0 committed_past_ledger", "0 duplicate data/events-0-250-copy.jsonl", "0 void_file_present data/events-0-750.jsonl")
		p := f.partition(t, r, 0)
		found := false
		for _, pr := range p.Problems {
			found = found || pr.Kind == "duplicate" && strings.Contains(pr.Message, "data/events-0-250.jsonl")
		}
		if p.Duplicates != 250 || !found {
			t.Errorf("duplicates %d: %+v", p.Duplicates, p.Problems)
		}
	})

	t.Run("paused writer's late file", func(t *testing.T) {
		dir := f.copyOf(t)
		b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		// Entry 3's writer was paused before publishing its file; a new
		// owner resumed from entry 3's state before, entered the same
		// name as entry 4, and lost the name to the late writer: resume
		// takes the file as entry 3's (zombieFirst), and so must verify.
		ctx := context.Background()
		l := ledger.New(b, prefix)
		id := f.id(t, 0)
		e3, err := l.Read(ctx, id, l.EntryKey(id, 3))
		if err != nil {
			t.Fatal(err)
		}
		e4 := *e3
		e4.Seq, e4.File.Bytes = 4, e3.File.Bytes+7
		if err := l.Append(ctx, &e4); err != nil {
			t.Fatal(err)
		}
		r := f.check(t, dir, true)
		wantProblems(t, r)
		p := f.partition(t, r, 0)
		if p.Handled != 1000 || p.Files != 4 || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], e3.File.Key) {
			t.Errorf("partition %+v, want entry 3's file explained", p)
		}
	})

	t.Run("records that can't be read", func(t *testing.T) {
		dir := f.copyOf(t)
		key := prefix + "events-1-250.jsonl"
		data := readAt(t, dir, key)
		// Same size: the ledger's checks can't see it, a deep check does,
		// by the file's checksum and by reading it back.
		lines := strings.SplitAfter(string(data), "\n")
		lines[3] = "[" + lines[3][1:]
		writeAt(t, dir, key, []byte(strings.Join(lines, "")))
		wantProblems(t, f.check(t, dir, false))
		r := f.check(t, dir, true)
		wantProblems(t, r, "1 checksum_mismatch "+key, "1 unreadable_record "+key)
		for _, q := range f.partition(t, r, 1).Problems {
			if q.Kind == audit.ProblemUnreadable && (q.Record == nil || *q.Record != 3) {
				t.Errorf("problem %+v, want record 3", q)
			}
		}
	})

	t.Run("ledger of a recreated topic", func(t *testing.T) {
		dir := f.copyOf(t)
		b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		writeAt(t, dir, prefix+"events-0-5000.jsonl", []byte("{}\n"))
		old := f.id(t, 0)
		old.TopicID = "AAAAAAAAAAAAAAAAAAAAAA"
		e := &ledger.Entry{Cluster: old.Cluster, Topic: old.Topic, TopicID: old.TopicID, Partition: 0,
			Before: offsets.State{Next: 5000},
			File:   ledger.FileInfo{Key: prefix + "events-0-5000.jsonl", Ranges: offsets.Ranges{{5000, 5001}}, Records: 1, Bytes: 3}}
		if err := ledger.New(b, prefix).Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		r := f.check(t, dir, false)
		// Its file is the old topic's, reported with its ledger.
		wantProblems(t, r, "-1 foreign_ledger data/_spillway/ledger/events/AAAAAAAAAAAAAAAAAAAAAA/")
	})

	// Last: it moves the group's commit, and puts it back.
	t.Run("commit past the log end", func(t *testing.T) {
		dir := f.copyOf(t)
		commit := func(at int64) {
			t.Helper()
			os := kadm.Offsets{}
			os.Add(kadm.Offset{Topic: "events", Partition: 1, At: at, LeaderEpoch: -1})
			resp, err := f.adm.CommitOffsets(context.Background(), group, os)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		commit(1100)
		defer commit(1000)
		r := f.check(t, dir, false)
		wantProblems(t, r, "1 committed_past_end", "1 committed_past_ledger", "1 gap")
		if p := f.partition(t, r, 1); !reflect.DeepEqual(p.Gaps, offsets.Ranges{{1000, 1100}}) || p.Committed != 1100 {
			t.Errorf("gaps %v, committed %d", p.Gaps, p.Committed)
		}
	})
}
