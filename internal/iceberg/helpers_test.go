package iceberg

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"go.uber.org/goleak"
)

// TestMain checks that no catalog, FileIO or scan leaves a goroutine
// behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// iceberg-go's GCS FileIO makes a storage client, with a transport
		// of its own, for each table it loads, and never closes it: its
		// keep-alive connections to fake-gcs-server (which keeps them
		// open) end only with the transport's 90 s idle timeout. They are
		// not Spillway's; every other connection is checked.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	)
}

// row is a record as Spillway's Parquet writer lays it out for a table,
// with Iceberg field ids numbered as a new table numbers them: top-level
// fields 1..n in order.
type row struct {
	Partition int32  `parquet:"partition,id(1)"`
	Offset    int64  `parquet:"offset,id(2)"`
	Timestamp int64  `parquet:"timestamp,id(3),timestamp(microsecond:utc)"`
	Key       []byte `parquet:"key,id(4),optional"`
	Value     []byte `parquet:"value,id(5),optional"`
}

// rowV2 is row with one optional field more, as a registry schema that
// gained a field gives it.
type rowV2 struct {
	Partition int32   `parquet:"partition,id(1)"`
	Offset    int64   `parquet:"offset,id(2)"`
	Timestamp int64   `parquet:"timestamp,id(3),timestamp(microsecond:utc)"`
	Key       []byte  `parquet:"key,id(4),optional"`
	Value     []byte  `parquet:"value,id(5),optional"`
	Extra     *string `parquet:"extra,id(6),optional"`
}

// rowBadType changes offset's type: an incompatible change.
type rowBadType struct {
	Partition int32  `parquet:"partition,id(1)"`
	Offset    string `parquet:"offset,id(2)"`
	Timestamp int64  `parquet:"timestamp,id(3),timestamp(microsecond:utc)"`
	Key       []byte `parquet:"key,id(4),optional"`
	Value     []byte `parquet:"value,id(5),optional"`
}

// rowNoIDs is a file written without field ids.
type rowNoIDs struct {
	Partition int32  `parquet:"partition"`
	Offset    int64  `parquet:"offset"`
	Timestamp int64  `parquet:"timestamp,timestamp(microsecond:utc)"`
	Key       []byte `parquet:"key,optional"`
	Value     []byte `parquet:"value,optional"`
}

// day0 is the records' first timestamp; each offset is one minute later.
var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func ts(off int64) int64 { return day0.Add(time.Duration(off) * time.Minute).UnixMicro() }

// writeRows writes rows as a Parquet file at path.
func writeRows[T any](t testing.TB, path string, rows []T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// dataFile writes the records [first, end) of topic/partition as a data
// file under the table's location in dir, and returns it as the ledger
// would describe it. tag tells apart two copies of one range (a zombie's).
func dataFile(t *testing.T, loc, topic string, part int32, first, end int64, tag string) File {
	t.Helper()
	rows := make([]row, 0, end-first)
	for o := first; o < end; o++ {
		rows = append(rows, row{Partition: part, Offset: o, Timestamp: ts(o), Key: []byte(fmt.Sprint("k", o)), Value: []byte(fmt.Sprint("v", o))})
	}
	return fileOf(t, loc, topic, part, first, end, tag, rows)
}

func fileOf[T any](t *testing.T, loc, topic string, part int32, first, end int64, tag string, rows []T) File {
	t.Helper()
	rel := fmt.Sprintf("data/%s-%d-%020d%s.parquet", topic, part, first, tag)
	path := filepath.Join(strings.TrimPrefix(loc, "file://"), rel)
	writeRows(t, path, rows)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The tests' files of a partition don't share a First, and take
	// their ledger order from it.
	return File{Location: loc + "/" + rel, Topic: topic, Partition: part, First: first, End: end, Seq: first, Records: int64(len(rows)), Bytes: fi.Size()}
}

// sqlOptions are the options of an embedded catalog whose warehouse is
// dir.
func sqlOptions(table string) Options {
	o := Defaults()
	o.Table = table
	return o
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// open opens the catalog of o over warehouse dir and closes it at the end.
func open(t *testing.T, o Options, dir string) *Catalog {
	t.Helper()
	c, err := Open(testCtx(t), o, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func openTable(t *testing.T, c *Catalog, name string) *Table {
	t.Helper()
	tb, err := c.Table(testCtx(t), name)
	if err != nil {
		t.Fatalf("Table(%s): %v", name, err)
	}
	return tb
}

func commit(t *testing.T, tb *Table, files ...File) {
	t.Helper()
	if err := tb.Commit(testCtx(t), files); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// dataFiles lists the data files of the table's current snapshot, as
// iceberg-go's planner gives them.
func dataFiles(t *testing.T, tb *Table) []string {
	t.Helper()
	tbl, err := tb.refresh(testCtx(t))
	if err != nil || tbl == nil {
		t.Fatalf("refresh: %v (table %v)", err, tbl)
	}
	tasks, err := tbl.Scan().PlanFiles(testCtx(t))
	if err != nil {
		t.Fatalf("PlanFiles: %v", err)
	}
	var out []string
	for _, task := range tasks {
		out = append(out, task.File.FilePath())
	}
	return out
}

// scanCount reads the table's current snapshot through iceberg-go's scan
// and returns its records and how many distinct (partition, offset) they
// hold.
func scanCount(t *testing.T, tb *Table) (records, distinct int) {
	t.Helper()
	tbl, err := tb.refresh(testCtx(t))
	if err != nil || tbl == nil {
		t.Fatalf("refresh: %v (table %v)", err, tbl)
	}
	_, batches, err := tbl.Scan().ToArrowRecords(testCtx(t))
	if err != nil {
		t.Fatalf("ToArrowRecords: %v", err)
	}
	seen := map[[2]int64]bool{}
	for b, err := range batches {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		pi := b.Schema().FieldIndices("partition")[0]
		oi := b.Schema().FieldIndices("offset")[0]
		parts := b.Column(pi)
		offs := b.Column(oi)
		for i := range int(b.NumRows()) {
			p := parts.GetOneForMarshal(i).(int32)
			o := offs.GetOneForMarshal(i).(int64)
			seen[[2]int64{int64(p), o}] = true
			records++
		}
		b.Release()
	}
	return records, len(seen)
}
