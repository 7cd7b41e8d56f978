package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/storage/storagetest"
)

func TestLocalCommitMakesVisible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts storage.Options
		size int
	}{
		{"small write, default parts", storage.Options{}, 100},
		{"many small parts", storage.Options{PartSize: 4096}, 100_000},
		{"several default parts", storage.Options{}, 3<<20 + 17},
		{"empty object", storage.Options{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, dir := storagetest.OpenLocal(t, tc.opts)
			const key = "events-0-0.jsonl"
			data := storagetest.Payload(tc.size)
			w, err := b.NewWriter(context.Background(), key, nil)
			if err != nil {
				t.Fatal(err)
			}
			if w.Key() != key {
				t.Fatalf("Key = %q", w.Key())
			}
			storagetest.WriteChunks(t, w, data)

			// Before Commit: nothing under the final name, nothing listed,
			// but the data lives in a hidden temp file in the same
			// directory (so the final rename is atomic).
			if _, err := os.Stat(filepath.Join(dir, key)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("final name visible before Commit: %v", err)
			}
			if objs := storagetest.List(t, b, ""); len(objs) != 0 {
				t.Fatalf("List before Commit = %v, want nothing (temp files are skipped)", objs)
			}
			if _, err := b.Read(context.Background(), key); err == nil {
				t.Fatal("Read succeeded before Commit")
			}
			tmp := storagetest.Files(t, dir)
			if len(tmp) != 1 || !strings.HasPrefix(tmp[0], ".") {
				t.Fatalf("files before Commit = %v, want one hidden temp file", tmp)
			}

			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := storagetest.Read(t, b, key); !bytes.Equal(got, data) {
				t.Fatalf("Read after Commit: %d bytes, want %d, equal=%v", len(got), len(data), bytes.Equal(got, data))
			}
			onDisk, err := os.ReadFile(filepath.Join(dir, key))
			if err != nil || !bytes.Equal(onDisk, data) {
				t.Fatalf("file on disk differs (%v)", err)
			}
			objs := storagetest.List(t, b, "")
			if len(objs) != 1 || objs[0] != (storage.Object{Key: key, Size: int64(len(data))}) {
				t.Fatalf("List = %+v", objs)
			}
			if got := storagetest.Files(t, dir); !slices.Equal(got, []string{key}) {
				t.Fatalf("files after Commit = %v, want only %s (temp file removed)", got, key)
			}
		})
	}
}

func TestLocalAbortLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		key  string
		size int
	}{
		{"no writes", "a.jsonl", 0},
		{"small", "a.jsonl", 1000},
		{"several parts queued", "a.jsonl", 50_000},
		{"subdirectory", "topic/0/a.jsonl", 50_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, dir := storagetest.OpenLocal(t, storage.Options{PartSize: 4096})
			w, err := b.NewWriter(context.Background(), tc.key, nil)
			if err != nil {
				t.Fatal(err)
			}
			storagetest.WriteChunks(t, w, storagetest.Payload(tc.size))
			w.Abort()
			w.Abort() // idempotent
			if got := storagetest.Files(t, dir); len(got) != 0 {
				t.Fatalf("files after Abort = %v, want none (no temp files either)", got)
			}
			if objs := storagetest.List(t, b, ""); len(objs) != 0 {
				t.Fatalf("List after Abort = %v", objs)
			}
			if err := w.Commit(); err == nil {
				t.Fatal("Commit after Abort succeeded")
			}
			if got := storagetest.Files(t, dir); len(got) != 0 {
				t.Fatalf("files after Commit-after-Abort = %v", got)
			}
		})
	}
}

func TestLocalCreateOnly(t *testing.T) {
	t.Parallel()
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	const key = "t/0/file.jsonl"
	first := []byte("first\n")
	storagetest.Put(t, b, key, first)

	w, err := b.NewWriter(context.Background(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.WriteChunks(t, w, []byte("second, longer\n"))
	err = w.Commit()
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second Commit = %v, want ErrExists", err)
	}
	if !strings.Contains(err.Error(), "file.jsonl") {
		t.Errorf("error %q does not name the object", err)
	}
	if got := storagetest.Read(t, b, key); !bytes.Equal(got, first) {
		t.Fatalf("object replaced: %q", got)
	}
	if got := storagetest.Files(t, dir); !slices.Equal(got, []string{key}) {
		t.Fatalf("files = %v, want only %s (failed commit leaves no temp file)", got, key)
	}
}

// TestLocalTempRemovedIsNamed: a commit whose temporary file another
// process removed (a partition's new owner sweeps a dead writer's) says
// so, and what it means, instead of a bare link error.
func TestLocalTempRemovedIsNamed(t *testing.T) {
	t.Parallel()
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	w, err := b.NewWriter(context.Background(), "t/0/file.jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.WriteChunks(t, w, []byte("record\n"))
	temps := storagetest.Files(t, dir)
	if len(temps) != 1 {
		t.Fatalf("files while writing = %v, want the temporary file", temps)
	}
	if err := os.Remove(filepath.Join(dir, temps[0])); err != nil {
		t.Fatal(err)
	}
	err = w.Commit()
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "temporary copy") || !strings.Contains(err.Error(), "storage.prefix") {
		t.Fatalf("Commit = %v, want it to say the temporary copy was removed, and the fix", err)
	}
}

func TestLocalCreateOnlyConcurrentWriters(t *testing.T) {
	t.Parallel()
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	const key = "k.jsonl"
	const n = 8
	ws := make([]*storage.Writer, n)
	for i := range ws {
		w, err := b.NewWriter(context.Background(), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		storagetest.WriteChunks(t, w, fmt.Appendf(nil, "writer %d\n", i))
		ws[i] = w
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = w.Commit() }()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both committed %s", winner, i, key)
		case err == nil:
			winner = i
		case !errors.Is(err, storage.ErrExists):
			t.Fatalf("writer %d: %v, want ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer committed")
	}
	if got, want := string(storagetest.Read(t, b, key)), fmt.Sprintf("writer %d\n", winner); got != want {
		t.Fatalf("object = %q, want the winner's %q", got, want)
	}
	if got := storagetest.Files(t, dir); !slices.Equal(got, []string{key}) {
		t.Fatalf("files = %v", got)
	}
}

func TestLocalSubdirectoriesAndListPrefixes(t *testing.T) {
	t.Parallel()
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	all := []string{"other.jsonl", "topic/p0/f1.jsonl", "topic/p0/f2.jsonl", "topic/p1/f1.jsonl", "topicx.jsonl"}
	for _, k := range all {
		storagetest.Put(t, b, k, []byte(k))
	}
	for _, k := range all {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(k))); err != nil {
			t.Fatalf("%s not at its path: %v", k, err)
		}
		if got := string(storagetest.Read(t, b, k)); got != k {
			t.Fatalf("Read(%s) = %q", k, got)
		}
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"topic", all[1:]},
		{"topic/", all[1:4]},
		{"topic/p", all[1:4]},
		{"topic/p0/", all[1:3]},
		{"topic/p0/f1", all[1:2]},
		{"topic/p0/f1.jsonl", all[1:2]},
		{"topic/p1/", all[3:4]},
		{"topic/p2/", nil},
		{"nothing/here/", nil},
		{"topic/p0/f1.jsonl/", nil},
		{"o", all[:1]},
	} {
		got := storagetest.Keys(storagetest.List(t, b, tc.prefix))
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %v, want %v", tc.prefix, got, tc.want)
		}
	}
	for _, o := range storagetest.List(t, b, "") {
		if o.Size != int64(len(o.Key)) {
			t.Errorf("%s: size %d, want %d", o.Key, o.Size, len(o.Key))
		}
	}
}

func TestLocalListStopsOnCallbackError(t *testing.T) {
	t.Parallel()
	b, _ := storagetest.OpenLocal(t, storage.Options{})
	storagetest.Put(t, b, "a", []byte("a"))
	storagetest.Put(t, b, "b", []byte("b"))
	stop := errors.New("stop")
	calls := 0
	err := b.List(context.Background(), "", func(storage.Object) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("List = %v after %d calls, want the callback's error after 1", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.List(ctx, "", func(storage.Object) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("List with a cancelled ctx = %v", err)
	}
}

func TestLocalKeyEscapingRootRefused(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	b := storagetest.Open(t, "file://"+dir, storage.Options{})
	secret := filepath.Join(parent, "x")
	if err := os.WriteFile(secret, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../x", "a/../../x", "..", "../out2/y", "", "."} {
		w, err := b.NewWriter(context.Background(), key, nil)
		if err == nil {
			w.Abort()
			t.Errorf("NewWriter(%q) accepted a key outside the storage directory", key)
			continue
		}
		if r, err := b.Read(context.Background(), key); err == nil {
			r.Close()
			t.Errorf("Read(%q) read outside the storage directory", key)
		}
	}
	// Nothing was created beside the storage directory.
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "out" && e.Name() != "x" {
			t.Errorf("unexpected %s beside the storage directory", e.Name())
		}
	}
	// Keys that only look odd but stay inside are fine.
	storagetest.Put(t, b, "a/../b.jsonl", []byte("b"))
	if got := string(storagetest.Read(t, b, "b.jsonl")); got != "b" {
		t.Fatalf("a/../b.jsonl stored as %q", got)
	}
}

func TestLocalListDoesNotEscapeRoot(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	b := storagetest.Open(t, "file://"+filepath.Join(parent, "out"), storage.Options{})
	if err := os.WriteFile(filepath.Join(parent, "outside.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := b.List(context.Background(), "../", func(o storage.Object) error {
		got = append(got, o.Key)
		return nil
	})
	if err == nil && len(got) != 0 {
		t.Fatalf(`List("../") = %v: lists objects outside the storage directory`, got)
	}
}

func TestLocalRootDirectory(t *testing.T) {
	t.Parallel()
	b := storagetest.Open(t, "file:///", storage.Options{})
	// A key that lands inside this test's temp directory.
	key := strings.TrimPrefix(filepath.ToSlash(t.TempDir()), "/") + "/x.jsonl"
	w, err := b.NewWriter(context.Background(), key, nil)
	if err != nil {
		t.Fatalf("NewWriter(%q) on file:/// = %v", key, err)
	}
	w.Abort()
}

func TestLocalReadMissing(t *testing.T) {
	t.Parallel()
	b, _ := storagetest.OpenLocal(t, storage.Options{})
	_, err := b.Read(context.Background(), "missing.jsonl")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestLocalConcurrentWriters(t *testing.T) {
	t.Parallel()
	b, dir := storagetest.OpenLocal(t, storage.Options{PartSize: 8192, UploadConcurrency: 2})
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("t/%d/file.jsonl", i)
			w, err := b.NewWriter(context.Background(), key, nil)
			if err != nil {
				errs <- err
				return
			}
			data := storagetest.Payload(100_000 + i)
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 3000)
				if _, err := w.Write(rest[:k]); err != nil {
					errs <- err
					return
				}
				rest = rest[k:]
			}
			errs <- w.Commit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		key := fmt.Sprintf("t/%d/file.jsonl", i)
		if got := storagetest.Read(t, b, key); !bytes.Equal(got, storagetest.Payload(100_000+i)) {
			t.Fatalf("%s differs", key)
		}
	}
	if got := storagetest.Files(t, dir); len(got) != n {
		t.Fatalf("files = %v, want %d objects and no temp files", got, n)
	}
}

// A writer that died mid-write leaves a temp file; the partition's next
// owner removes exactly the temp files whose final key is its own.
func TestRemoveAbandoned(t *testing.T) {
	t.Parallel()
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	ctx := context.Background()
	mine, err := b.NewWriter(ctx, "out/t-0-5.jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.NewWriter(ctx, "out/t-1-5.jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*storage.Writer{mine, other} {
		if _, err := w.Write(bytes.Repeat([]byte("x"), 300<<10)); err != nil {
			t.Fatal(err)
		}
	}
	// NewWriter creates the temp file: no need to wait for the writes.
	if got := storagetest.Files(t, dir); len(got) != 2 {
		t.Fatalf("temp files before cleanup: %v, want 2", got)
	}
	// This process's own writers are not abandoned, even when their
	// partition comes back to it before their upload ended.
	if err := b.RemoveAbandoned(ctx, "out/t-0-", func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if got := storagetest.Files(t, dir); len(got) != 2 {
		t.Fatalf("RemoveAbandoned removed the temp files of its own writers: %v left", got)
	}
	// Another process (a new bucket on the same directory) takes them for
	// a dead writer's.
	next, err := storage.Open(ctx, "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	err = next.RemoveAbandoned(ctx, "out/t-0-", func(key string) bool { return key == "out/t-0-5.jsonl" })
	if err != nil {
		t.Fatal(err)
	}
	got := storagetest.Files(t, dir)
	if len(got) != 1 || !strings.Contains(got[0], "t-1-5.jsonl") {
		t.Fatalf("after removing partition 0's abandoned file: %v, want only partition 1's temp file", got)
	}
	mine.Abort()
	other.Abort()
}

// TestRemoveAbandonedInFolders: a file's temp file is in the file's own
// folder, which can be any folder under the prefix's (a template with a
// variable before {{start_offset}}, or a "/" after it): RemoveAbandoned
// finds them there, and leaves those of keys outside the prefix.
func TestRemoveAbandonedInFolders(t *testing.T) {
	t.Parallel()
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	ctx := context.Background()
	keys := []string{"out/t/2026/0-5.jsonl", "out/t-0-5/part.jsonl", "out/tx/2026/0-5.jsonl", "other/t/2026/0-5.jsonl"}
	for _, k := range keys {
		w, err := b.NewWriter(ctx, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
	}
	// Another process on the same directory takes them for a dead
	// writer's.
	next, err := storage.Open(ctx, "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	var asked []string
	for _, prefix := range []string{"out/t/", "out/t-0-"} {
		err := next.RemoveAbandoned(ctx, prefix, func(key string) bool { asked = append(asked, key); return true })
		if err != nil {
			t.Fatal(err)
		}
	}
	got := storagetest.Files(t, dir)
	if len(got) != 2 || !strings.HasPrefix(got[0], "other/t/2026/.spillway-tmp-0-5.jsonl.") || !strings.HasPrefix(got[1], "out/tx/2026/.spillway-tmp-0-5.jsonl.") {
		t.Errorf("left %v, want the temp files of other/t/2026/0-5.jsonl and out/tx/2026/0-5.jsonl", got)
	}
	if want := []string{"out/t/2026/0-5.jsonl", "out/t-0-5/part.jsonl"}; !slices.Equal(asked, want) {
		t.Errorf("asked about %q, want %q", asked, want)
	}
}

// TestLocalFileModeFollowsUmask writes objects in a child process (the
// umask is the process's, so a test can't change it in place) under
// several umasks: a committed file is 0666 less the umask, as open(2) and
// other writers make it, not os.CreateTemp's 0600; a directory is 0777
// less the umask, as mkdir -p makes it.
func TestLocalFileModeFollowsUmask(t *testing.T) {
	t.Parallel()
	if want := os.Getenv("SPILLWAY_TEST_UMASK_WANT"); want != "" {
		umaskChild(t, want)
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("the umask is read from /proc/self/status: %v", err)
	}
	for _, umask := range []string{"0002", "0027", "0077"} {
		t.Run(umask, func(t *testing.T) {
			mask, _ := strconv.ParseUint(umask, 8, 32)
			cmd := exec.Command("sh", "-c", "umask "+umask+` && exec "$0" -test.run='^TestLocalFileModeFollowsUmask$' -test.v`, os.Args[0])
			cmd.Env = append(os.Environ(), fmt.Sprintf("SPILLWAY_TEST_UMASK_WANT=%o", mask))
			out, err := cmd.CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("--- PASS: TestLocalFileModeFollowsUmask")) {
				t.Fatalf("under umask %s: %v\n%s", umask, err, out)
			}
		})
	}
}

// umaskChild is TestLocalFileModeFollowsUmask in the child process.
func umaskChild(t *testing.T, want string) {
	mask, err := strconv.ParseUint(want, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	b, dir := storagetest.OpenLocal(t, storage.Options{})
	storagetest.Put(t, b, "topic/part/events-0-0.jsonl", []byte("x\n"))
	if err := b.Replace(context.Background(), "topic/latest.json", []byte("{}"), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rel  string
		mode fs.FileMode
	}{
		{"topic/part/events-0-0.jsonl", 0o666 &^ fs.FileMode(mask)},
		{"topic/latest.json", 0o666 &^ fs.FileMode(mask)},
		{"topic/part", fs.ModeDir | 0o777&^fs.FileMode(mask)},
	} {
		info, err := os.Stat(filepath.Join(dir, c.rel))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != c.mode {
			t.Errorf("%s: mode %v under umask %04o, want %v", c.rel, info.Mode(), mask, c.mode)
		}
	}
}
