package spool_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/internal/spool"
)

func records() []*kgo.Record {
	big := bytes.Repeat([]byte("v"), 200<<10)
	ts := time.UnixMilli(1_700_000_000_123)
	return []*kgo.Record{
		{Topic: "t", Partition: 3, Offset: 10, Timestamp: ts, Key: nil, Value: nil},
		{Topic: "t", Partition: 3, Offset: 11, Timestamp: ts, Key: []byte{}, Value: []byte{}},
		{Topic: "t", Partition: 3, Offset: 12, Timestamp: ts.Add(time.Second), Key: []byte("k"), Value: []byte("v"),
			Headers: []kgo.RecordHeader{{Key: "a", Value: nil}, {Key: "", Value: []byte{}}, {Key: "c", Value: []byte("x")}}},
		{Topic: "other", Partition: -1, Offset: -5, Timestamp: time.UnixMilli(-1), Key: big, Value: big,
			Headers: []kgo.RecordHeader{{Key: "big", Value: big}}},
		{Topic: "t", Partition: 3, Offset: 1 << 40, Timestamp: time.Time{}, Key: []byte("after big"), Value: []byte("v")},
	}
}

func same(t *testing.T, i int, got, want *kgo.Record) {
	t.Helper()
	eqNil := func(what string, a, b []byte) {
		if (a == nil) != (b == nil) || !bytes.Equal(a, b) {
			t.Errorf("record %d %s: got %q (nil %v), want %q (nil %v)", i, what, trunc(a), a == nil, trunc(b), b == nil)
		}
	}
	if got.Topic != want.Topic || got.Partition != want.Partition || got.Offset != want.Offset ||
		got.Timestamp.UnixMilli() != want.Timestamp.UnixMilli() {
		t.Errorf("record %d: got %s/%d@%d %d, want %s/%d@%d %d", i, got.Topic, got.Partition, got.Offset, got.Timestamp.UnixMilli(),
			want.Topic, want.Partition, want.Offset, want.Timestamp.UnixMilli())
	}
	eqNil("key", got.Key, want.Key)
	eqNil("value", got.Value, want.Value)
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("record %d: %d headers, want %d", i, len(got.Headers), len(want.Headers))
	}
	for j := range want.Headers {
		if got.Headers[j].Key != want.Headers[j].Key {
			t.Errorf("record %d header %d key %q, want %q", i, j, got.Headers[j].Key, want.Headers[j].Key)
		}
		eqNil("header value", got.Headers[j].Value, want.Headers[j].Value)
	}
}

func trunc(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	s, _, err := spool.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	want := records()
	var total int64
	// Two appends, then many small ones past a page-cache window.
	for _, batch := range [][]*kgo.Record{want[:3], want[3:]} {
		n, err := f.Append(batch)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	for i := range 3000 {
		r := &kgo.Record{Topic: "t", Offset: int64(100 + i), Value: bytes.Repeat([]byte{byte(i)}, 2000)}
		n, err := f.Append([]*kgo.Record{r})
		if err != nil {
			t.Fatal(err)
		}
		total += n
		want = append(want, r)
	}
	if f.Size() != total {
		t.Fatalf("Size %d, appends added %d", f.Size(), total)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir(), "1.spool")); err != nil || fi.Size() != total {
		t.Fatalf("file on disk: %v, %v; want %d bytes", fi, err, total)
	}
	r := f.Reader()
	for i, w := range want {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		same(t, i, got, w)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want EOF", err)
	}
	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(s.Dir()); len(ents) != 0 {
		t.Fatalf("left after Remove: %v", ents)
	}
}

// TestAppendFailureCutsBack: a failed append leaves the file as it was
// before it, readable to its end.
func TestAppendFailureCutsBack(t *testing.T) {
	dir := tmpfs(t, "1m")
	s, _, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	one := []*kgo.Record{{Topic: "t", Offset: 1, Value: bytes.Repeat([]byte("a"), 300<<10)}}
	var good int64
	var appendErr error
	for i := 0; i < 10 && appendErr == nil; i++ {
		one[0].Offset = int64(i)
		var n int64
		n, appendErr = f.Append(one)
		good += n
	}
	if appendErr == nil {
		t.Fatal("appends never failed on a 1MiB file system")
	}
	if f.Size() != good {
		t.Fatalf("Size %d after a failed append, want %d", f.Size(), good)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir(), "1.spool")); err != nil || fi.Size() != good {
		t.Fatalf("on disk %v %v, want %d bytes", fi, err, good)
	}
	r := f.Reader()
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Offset != int64(n) {
			t.Fatalf("record %d has offset %d", n, rec.Offset)
		}
		n++
	}
	if n == 0 {
		t.Fatal("nothing read back")
	}
	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
}

// tmpfs mounts a tmpfs of size on a new directory, or skips.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("can't mount a tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestSharedDirectory: two live spools in one directory keep their own
// subdirectories; a stale one (its lock free) is removed at the next
// start, a live one never.
func TestSharedDirectory(t *testing.T) {
	root := t.TempDir()
	a, removed, err := spool.Open(root)
	if err != nil || removed != 0 {
		t.Fatalf("first: %v, removed %d", err, removed)
	}
	fa, err := a.Create()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fa.Append(records()[:3]); err != nil {
		t.Fatal(err)
	}
	// A stale subdirectory: a dead process's, its lock file not held.
	stale := filepath.Join(root, "spillway-1-dead")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "7.spool"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Half removed: a subdirectory without its lock file.
	orphan := filepath.Join(root, "spillway-2-orphan")
	if err := os.MkdirAll(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	// Not ours at all.
	other := filepath.Join(root, "keep-me")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	b, removed, err := spool.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("second start removed %d subdirectories, want 2 (the stale and the orphan)", removed)
	}
	for _, p := range []string{stale, stale + ".lock", orphan} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file that is not a spool's was touched: %v", err)
	}
	if a.Dir() == b.Dir() {
		t.Fatalf("both spools in %s", a.Dir())
	}
	// a is alive: its file is whole.
	r := fa.Reader()
	for i, w := range records()[:3] {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("live spool's record %d after the second start: %v", i, err)
		}
		same(t, i, got, w)
	}
	// A third start while both live removes nothing.
	c, removed, err := spool.Open(root)
	if err != nil || removed != 0 {
		t.Fatalf("third: %v, removed %d, want 0", err, removed)
	}
	// A process that dies without Close leaves its lock free: simulated
	// by a child process that opens a spool and exits.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left %s", b.Dir())
	}
	ents, _ := os.ReadDir(root)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 3 || !slices.Contains(names, "keep-me") {
		t.Errorf("left in the spool directory: %v, want a's subdirectory and lock, and keep-me", names)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDeadProcess: a process killed while it holds a spool leaves its
// subdirectory behind, and the next start removes it.
func TestDeadProcess(t *testing.T) {
	if os.Getenv("SPOOL_CHILD") != "" {
		s, _, err := spool.Open(os.Getenv("SPOOL_CHILD"))
		if err != nil {
			os.Exit(3)
		}
		f, _ := s.Create()
		_, _ = f.Append(records())
		os.Exit(0) // without Close: as if killed
	}
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeadProcess$")
	cmd.Env = append(os.Environ(), "SPOOL_CHILD="+root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 2 {
		t.Fatalf("the child left %d entries, want its subdirectory and lock", len(ents))
	}
	s, removed, err := spool.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if removed != 1 {
		t.Fatalf("removed %d, want the dead process's 1", removed)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 2 {
		t.Fatalf("left %d entries, want only the new spool's 2", len(ents))
	}
}

// TestReadShort: a spool file cut behind the appender's back reads back
// as an error, never as a shorter run of records.
func TestReadShort(t *testing.T) {
	s, _, err := spool.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Remove()
	recs := records()[:3]
	if _, err := f.Append(recs); err != nil {
		t.Fatal(err)
	}
	// Cut at a record boundary: after the first record.
	first, err := (&spoolSizer{}).size(t, recs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(s.Dir(), "1.spool"), first); err != nil {
		t.Fatal(err)
	}
	r := f.Reader()
	if _, err := r.Next(); err != nil {
		t.Fatalf("first record: %v", err)
	}
	if _, err := r.Next(); !errors.Is(err, spool.ErrCorrupt) {
		t.Fatalf("past the cut: %v, want ErrCorrupt", err)
	}
}

// spoolSizer measures what recs take in a spool file.
type spoolSizer struct{}

func (spoolSizer) size(t *testing.T, recs []*kgo.Record) (int64, error) {
	s, _, err := spool.Open(t.TempDir())
	if err != nil {
		return 0, err
	}
	defer s.Close()
	f, err := s.Create()
	if err != nil {
		return 0, err
	}
	defer f.Remove()
	return f.Append(recs)
}

// TestPageCacheDropped: a spool file written past a few windows keeps at
// most its last two windows in the page cache, so that the spool does
// not fill a memory cgroup with page cache.
func TestPageCacheDropped(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is a tmpfs, whose pages are its storage: nothing to drop")
	}
	s, _, err := spool.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Remove()
	value := bytes.Repeat([]byte("x"), 100<<10)
	for i := range 320 { // about 32 MiB, eight windows
		if _, err := f.Append([]*kgo.Record{{Topic: "t", Offset: int64(i), Value: value}}); err != nil {
			t.Fatal(err)
		}
	}
	resident := func() int64 {
		t.Helper()
		fd, err := unix.Open(filepath.Join(s.Dir(), "1.spool"), unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		m, err := unix.Mmap(fd, 0, int(f.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		page := os.Getpagesize()
		vec := make([]byte, (len(m)+page-1)/page)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		var n int64
		for _, v := range vec {
			n += int64(v & 1)
		}
		return n * int64(page)
	}
	if n := resident(); n > 12<<20 {
		t.Fatalf("%d MiB of a %d MiB spool file in the page cache after writing, want at most about two 4 MiB windows", n>>20, f.Size()>>20)
	}
	r := f.Reader()
	for {
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if n := resident(); n > 12<<20 {
		t.Fatalf("%d MiB of the spool file in the page cache after reading it back", n>>20)
	}
}

// TestDirRemoved: the spool directory removed whole under a live spool is
// created again by the next Create, with the subdirectory's lock file
// held again: another process starting then does not take it for a dead
// one's and remove it. A file open at the removal still reads back. Create
// used to fail with "no such file or directory" for the rest of the run.
func TestDirRemoved(t *testing.T) {
	root := filepath.Join(t.TempDir(), "spool")
	s, _, err := spool.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Remove()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if _, err := before.Append(records()[:3]); err != nil {
		t.Fatalf("append to a file open at the removal: %v", err)
	}
	f, err := s.Create()
	if err != nil {
		t.Fatalf("create after the directory was removed: %v", err)
	}
	defer f.Remove()
	if _, err := f.Append(records()[:3]); err != nil {
		t.Fatal(err)
	}
	other, removed, err := spool.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if removed != 0 {
		t.Errorf("another start removed %d subdirectories: the live spool's lock is not held", removed)
	}
	for _, f := range []*spool.File{before, f} {
		r := f.Reader()
		for i, w := range records()[:3] {
			got, err := r.Next()
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			same(t, i, got, w)
		}
	}
}
