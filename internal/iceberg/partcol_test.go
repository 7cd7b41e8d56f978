package iceberg

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/iceberg/tableschema"
)

// envRowP is a record as the envelope writer lays it out since the
// envelope has the Kafka partition: an optional int column, field id 9.
type envRowP struct {
	Key       []byte `parquet:"key,id(1),optional"`
	Value     []byte `parquet:"value,id(2),optional"`
	Offset    int64  `parquet:"offset,id(3)"`
	Timestamp int64  `parquet:"timestamp,id(4),timestamp(microsecond:utc)"`
	Partition *int32 `parquet:"partition,id(9),optional"`
}

// envFileP writes the records [first, end) of Kafka partition part, their
// partition column holding col, in the folder dir under data/, and
// returns it as the ledger describes it (Kafka partition part).
func envFileP(t *testing.T, loc, dir string, part, col int32, first, end int64) File {
	t.Helper()
	var rows []envRowP
	for o := first; o < end; o++ {
		rows = append(rows, envRowP{Key: keyOf(o), Value: []byte(fmt.Sprint("v", o)), Offset: o, Timestamp: ts(o), Partition: &col})
	}
	rel := fmt.Sprintf("data/%sevents-%d-%020d.parquet", dir, part, first)
	writeRows(t, filepath.Join(strings.TrimPrefix(loc, "file://"), rel), rows)
	return File{Location: loc + "/" + rel, Topic: "events", Partition: part, First: first, End: end, Seq: first, Records: end - first}
}

// scanPartitions reads the table through iceberg-go's scan and returns
// each offset's partition column ("null" for a null).
func scanPartitions(t *testing.T, tb *Table) map[int64]string {
	t.Helper()
	tbl, err := tb.refresh(testCtx(t))
	if err != nil || tbl == nil {
		t.Fatalf("refresh: %v (table %v)", err, tbl)
	}
	_, batches, err := tbl.Scan().ToArrowRecords(testCtx(t))
	if err != nil {
		t.Fatalf("ToArrowRecords: %v", err)
	}
	out := map[int64]string{}
	for b, err := range batches {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		pi, oi := b.Schema().FieldIndices("partition"), b.Schema().FieldIndices("offset")
		if len(pi) != 1 || len(oi) != 1 {
			t.Fatalf("scan schema %s: no partition or offset column", b.Schema())
		}
		for i := range int(b.NumRows()) {
			out[b.Column(oi[0]).GetOneForMarshal(i).(int64)] = nullStr(b.Column(pi[0]).GetOneForMarshal(i))
		}
		b.Release()
	}
	return out
}

// TestPartitionColumnInOlderTables: tables made from files written before
// the envelope held the Kafka partition (one partitioned by partition,
// whose schema has the column the files lacked, and one not partitioned,
// with evolve_schema off, whose schema has no such column) take files
// that hold it: the column keeps id 9, and iceberg-go's scan reads each
// new file's rows with their partition (the old files' rows are read
// null by iceberg-go, which does not take them from the manifest).
func TestPartitionColumnInOlderTables(t *testing.T) {
	t.Parallel()
	for _, by := range [][]string{{"partition"}, nil} {
		t.Run(fmt.Sprint(by), func(t *testing.T) {
			t.Parallel()
			o := sqlOptions("kafka.events")
			o.PartitionBy = by
			o.EvolveSchema = false
			tb := openTable(t, open(t, o, t.TempDir()), "kafka.events")
			dir := ""
			if len(by) > 0 {
				dir = "partition=3/"
			}
			commit(t, tb, envFile(t, tb.Location(), dir, 3, 0, 10, 0, 0))
			_, had := tb.tbl.Schema().FindFieldByName("partition")
			if had != (len(by) > 0) {
				t.Fatalf("before: the table has a partition column: %v", had)
			}
			commit(t, tb, envFileP(t, tb.Location(), dir, 3, 3, 10, 20))
			f, ok := tb.tbl.Schema().FindFieldByName("partition")
			if !ok || f.ID != tableschema.PartitionFieldID || f.Required || f.Type.String() != "int" {
				t.Fatalf("after: the table's partition column: %v, %v", f, ok)
			}
			got := scanPartitions(t, tb)
			if len(got) != 20 {
				t.Fatalf("scan: %d rows, want 20", len(got))
			}
			for o := int64(10); o < 20; o++ {
				if got[o] != "3" {
					t.Errorf("offset %d: partition %s, want 3", o, got[o])
				}
			}
		})
	}
}

// TestPartitionColumnBoundsChecked: a file whose partition column holds
// another Kafka partition than its ledger entry (and folder) says is
// refused, naming the partition field; nothing is committed.
func TestPartitionColumnBoundsChecked(t *testing.T) {
	t.Parallel()
	o := sqlOptions("kafka.events")
	o.PartitionBy = []string{"partition"}
	tb := openTable(t, open(t, o, t.TempDir()), "kafka.events")
	err := tb.Commit(testCtx(t), []File{envFileP(t, tb.Location(), "partition=3/", 3, 4, 0, 10)})
	if err == nil || !strings.Contains(err.Error(), "the partition field partition is 3 by the file's folder, but its lowest partition") {
		t.Fatalf("Commit = %v, want the bounds named", err)
	}
	if next, err := tb.Next(testCtx(t), "events"); err != nil || len(next) != 0 {
		t.Fatalf("Next = %v, %v; want nothing committed", next, err)
	}
	commit(t, tb, envFileP(t, tb.Location(), "partition=3/", 3, 3, 0, 10))
}
