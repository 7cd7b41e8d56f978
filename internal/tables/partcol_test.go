package tables

import (
	"context"
	"database/sql"
	"fmt"
	goio "io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formatopts"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// TestSinkTablePartitionColumn writes records of Kafka partitions 0 and 1
// through the real sink, with the format run gives a table (format.fields
// left at its default; config.ApplyIcebergLayout), into a table
// partitioned by partition and into one that is not (bucket(4, key)).
// Readers nobody here wrote see each record's Kafka partition, which its
// value names: DuckDB's read_parquet of the data files, without Hive
// folders, and iceberg-go's scan of the table (which read null in the
// table partitioned by partition, and found no column in the other, when
// the files did not hold it).
func TestSinkTablePartitionColumn(t *testing.T) {
	t.Parallel()
	duck := outside.NewDuckDB(t)
	for _, by := range [][]string{{"partition"}, {"bucket(4,key)"}} {
		t.Run(strings.Join(by, ","), func(t *testing.T) {
			t.Parallel()
			const perPartition = 30
			pq := tableFormat()
			dir, _ := runPartitioned(t, by, perPartition, func(_ *naming.Template, c *sink.Config) {
				c.MaxRecords = 7
				c.NewEncoder = func(w goio.Writer) (format.Encoder, error) { return formats.NewEncoder(pq, w) }
				c.Policy = errpolicy.Policy{Tolerance: "none"}
			}, func(p int32, o int64) *kgo.Record { return recordOf(p, o) })

			glob := filepath.Join(dir, "kafka.db", "t", "data", "**", "*.parquet")
			rows := duck.Query(t, fmt.Sprintf(`SELECT value, "partition" FROM read_parquet('%s', hive_partitioning = false)`, glob))[0]
			if len(rows) != 2*perPartition {
				t.Fatalf("DuckDB read %d rows, want %d", len(rows), 2*perPartition)
			}
			for _, r := range rows {
				if want := "p" + fmt.Sprint(r["partition"]) + "/"; !strings.HasPrefix(fmt.Sprint(r["value"]), want) {
					t.Errorf("DuckDB: value %v has partition %v", r["value"], r["partition"])
				}
			}

			got := scanTable(t, dir)
			if len(got) != 2*perPartition {
				t.Fatalf("iceberg-go scanned %d rows, want %d", len(got), 2*perPartition)
			}
			for value, part := range got {
				if !strings.HasPrefix(value, "p"+part+"/") {
					t.Errorf("iceberg-go: value %s has partition %s", value, part)
				}
			}
		})
	}
}

// tableFormat is the format run writes a table's files with, format.fields
// left at its default: config applies the table's layout to it.
func tableFormat() config.Format {
	var c config.Config
	c.Iceberg = iceberg.Defaults()
	c.Iceberg.Table = "kafka.{{topic}}"
	c.Format = config.Format{Type: "parquet", Compression: "zstd", Fields: formatopts.DefaultFields(), ValueEncoding: "none", Envelope: true}
	c.ApplyIcebergLayout()
	return c.Format
}

// scanTable reads table kafka.t of the SQLite catalog in dir through
// iceberg-go's own catalog and scan, and returns each row's partition
// column ("null" for a null) by its value.
func scanTable(t *testing.T, dir string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open("sqlite", filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog(iceberg.CatalogName, db, sqlcat.SQLite, iceberggo.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{"kafka", "t"})
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for b, err := range batches {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		pi, vi := b.Schema().FieldIndices("partition"), b.Schema().FieldIndices("value")
		if len(pi) != 1 || len(vi) != 1 {
			b.Release()
			t.Fatalf("iceberg-go's scan has no partition or value column: %s", b.Schema())
		}
		for i := range int(b.NumRows()) {
			p := "null"
			if v := b.Column(pi[0]).GetOneForMarshal(i); v != nil {
				p = fmt.Sprint(v)
			}
			out[fmt.Sprint(b.Column(vi[0]).GetOneForMarshal(i))] = p
		}
		b.Release()
	}
	return out
}
