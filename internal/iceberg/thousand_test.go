package iceberg

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestThousandCommits commits many times to one table of the SQL catalog,
// one small file each (a low-volume topic at commit_interval: 1m makes 60
// snapshots an hour), and reports what a table Spillway creates looks like
// after: its manifests, which merge (commit.manifest-merge.enabled), stay
// bounded; the metadata files kept, which are deleted past the last 100
// (write.metadata.delete-after-commit.enabled); the current metadata file,
// which lists every snapshot and so grows with each (nothing expires
// snapshots yet); and what a commit costs at the start and at the end.
// Every file is in the current snapshot once, and the newest snapshot
// alone still says where the table ends (PropOffsets, PropLedger).
//
// CI commits 150 times (past both thresholds of 100): a commit rewrites
// the whole metadata file, so n commits cost n² and 1,000 take minutes.
// SPILLWAY_TEST_COMMITS=1000 gives the figures (docs/iceberg.md,
// "Scale and cost"). SPILLWAY_TEST_EXPIRE_KEEP=K expires, after each
// commit, every snapshot past the last K (Expire, as the commit loop
// runs it with iceberg.expire_snapshots keep_last K, max_age 0s).
func TestThousandCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 150 times; skipped with -short")
	}
	t.Parallel()
	commits := 150
	if v := os.Getenv("SPILLWAY_TEST_COMMITS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("SPILLWAY_TEST_COMMITS=%q: want a count of at least 2", v)
		}
		commits = n
	}
	keep := 0
	if v := os.Getenv("SPILLWAY_TEST_EXPIRE_KEEP"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SPILLWAY_TEST_EXPIRE_KEEP=%q: want a count of at least 1", v)
		}
		keep = n
	}
	o := sqlOptions("kafka.events")
	o.ExpireSnapshots = ExpireOptions{Enabled: keep > 0, KeepLast: keep}
	dir := t.TempDir()
	tb := openTable(t, open(t, o, dir), "kafka.events")
	loc := tb.Location()
	files := make([]File, commits)
	for i := range commits {
		// Two partitions, as a topic's would alternate.
		files[i] = dataFile(t, loc, "events", int32(i%2), int64(i/2), int64(i/2+1), "")
	}
	var first, last time.Duration
	start := time.Now()
	for i, f := range files {
		at := time.Now()
		commit(t, tb, f)
		if _, err := tb.Expire(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		took := time.Since(at)
		switch {
		case i < 10:
			first += took
		case i >= commits-10:
			last += took
		}
	}
	total := time.Since(start)

	tbl, err := tb.refresh(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	meta := tbl.Metadata()
	fs, err := tbl.FS(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	metaFiles, metaBytes := countFiles(t, dir, ".metadata.json")
	avroFiles, avroBytes := countFiles(t, dir, ".avro")
	t.Logf("%d commits in %s: the first 10 took %s each, the last 10 %s each",
		commits, total.Round(time.Millisecond), (first / 10).Round(time.Microsecond), (last / 10).Round(time.Microsecond))
	t.Logf("after: %d snapshots, %d manifests in the current snapshot, current metadata file %d bytes (%d bytes per snapshot); %d metadata files kept (%d bytes), %d manifest and manifest-list files (%d bytes)",
		len(meta.Snapshots()), len(ms), st.Size(), st.Size()/int64(len(meta.Snapshots())), metaFiles, metaBytes, avroFiles, avroBytes)

	want := commits
	if keep > 0 {
		want = min(commits, keep)
	}
	if got := len(meta.Snapshots()); got != want {
		t.Errorf("%d snapshots after %d commits (expiry keeping %d), want %d", got, commits, keep, want)
	}
	// Merging keeps the manifests of the current snapshot below the
	// merge threshold (commit.manifest.min-count-to-merge, 100), however
	// many commits.
	if len(ms) > 100 {
		t.Errorf("%d manifests in the current snapshot after %d commits: they do not merge", len(ms), commits)
	}
	// The current metadata file and the 100 before it.
	if metaFiles > 101 {
		t.Errorf("%d metadata files kept after %d commits, want at most 101: old ones are not deleted", metaFiles, commits)
	}
	if n := len(dataFiles(t, tb)); n != commits {
		t.Errorf("the current snapshot holds %d data files, want %d", n, commits)
	}
	seqs, err := tb.Held(testCtx(t), "events")
	if err != nil {
		t.Fatal(err)
	}
	if want := files[commits-1].Seq; seqs[int32((commits-1)%2)] != want {
		t.Errorf("held ledger seqs %v, want partition %d at %d", seqs, (commits-1)%2, want)
	}
}

// countFiles counts the files under dir whose names end in suffix, and
// their bytes.
func countFiles(t *testing.T, dir, suffix string) (n int, bytes int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		path := dir + "/" + e.Name()
		if e.IsDir() {
			m, b := countFiles(t, path, suffix)
			n, bytes = n+m, bytes+b
			continue
		}
		if strings.HasSuffix(e.Name(), suffix) {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n, bytes = n+1, bytes+fi.Size()
		}
	}
	return n, bytes
}
