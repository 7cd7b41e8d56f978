package maintain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"
)

// TestMain checks that no catalog, FileIO or expiry leaves a goroutine
// behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mark is the summary property of the snapshots the tests count as
// Spillway's.
const mark = "test.mark"

type row struct {
	Offset int64 `parquet:"offset,id(1)"`
}

// newTable creates table "ns.t" in an embedded SQL catalog over a
// warehouse in a temporary directory, as iceberg-go's own catalog does.
func newTable(t *testing.T) (*table.Table, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cat, err := sqlcat.NewCatalog("test", db, sqlcat.SQLite, iceberg.Properties{"warehouse": "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "offset", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "t"}, sc)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, dir
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// appendFile writes a Parquet file of one record under dir and appends
// it to tbl in a snapshot of its own, with the summary props.
func appendFile(t *testing.T, tbl *table.Table, dir string, n int, props iceberg.Properties) (*table.Table, string) {
	t.Helper()
	path := filepath.Join(dir, "data", fmt.Sprintf("f-%d.parquet", n))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(path, []row{{Offset: int64(n)}}); err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.AddFiles(testCtx(t), []string{"file://" + path}, props, true); err != nil {
		t.Fatal(err)
	}
	after, err := tx.Commit(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return after, "file://" + path
}

// TestExpireKeepsNewestMarked appends three marked snapshots and two
// unmarked ones on top (another engine's), and expires keeping the last
// one at any age: the two unmarked ones and the newest marked one under
// them stay, the two older ones go. Every snapshot's files are still
// referenced (each append keeps the files before it), and an expiry with
// nothing left to expire makes no commit.
func TestExpireKeepsNewestMarked(t *testing.T) {
	t.Parallel()
	tbl, dir := newTable(t)
	var files []string
	for i := range 5 {
		props := iceberg.Properties{mark: "x"}
		if i >= 3 {
			props = nil
		}
		var f string
		tbl, f = appendFile(t, tbl, dir, i, props)
		files = append(files, f)
	}
	o := ExpireOptions{Enabled: true, MaxAge: 0, KeepLast: 1}
	after, n, err := Expire(testCtx(t), tbl, o, mark)
	if err != nil || after == nil {
		t.Fatalf("Expire: %v (table %v)", err, after)
	}
	if got := len(after.Metadata().Snapshots()); n != 2 || got != 3 {
		t.Errorf("expired %d snapshots, %d left; want 2 expired, 3 left (2 unmarked, the newest marked)", n, got)
	}
	fio, err := after.FS(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Referenced(after, fio)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref) != len(files) {
		t.Errorf("referenced %v, want all of %v", ref, files)
	}
	again, n, err := Expire(testCtx(t), after, o, mark)
	if again != nil || n != 0 || err != nil {
		t.Errorf("Expire with nothing to expire: %v, %d, %v; want no commit", again, n, err)
	}
}

// TestFilesStatRemove stats a file through a FileIO, removes it, and
// removes it again: a file already gone is no error, as a second run
// over the same orphans finds.
func TestFilesStatRemove(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orphan.parquet")
	if err := os.WriteFile(path, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := NewFiles(iceio.LocalFS{}, "ns.t", nil)
	fi, err := files.Stat(path)
	if err != nil || fi.Bytes != 5 || fi.Modified.IsZero() {
		t.Fatalf("Stat: %+v, %v", fi, err)
	}
	for range 2 {
		if err := files.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := files.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a removed file: %v, want fs.ErrNotExist", err)
	}
}
