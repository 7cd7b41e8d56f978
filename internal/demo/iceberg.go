package demo

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/naming/tablepath"
	"github.com/spillway/spillway/internal/tables"
)

// icebergTable is the demo's table: one per topic, in namespace demo.
const icebergTable = "demo.{{topic}}"

// useIceberg turns cfg, the demo's config writing to dir, into one that
// commits the files to an Iceberg table: Parquet files in the table's
// layout, day partitions by the records' own timestamps, the embedded SQL
// catalog in a SQLite file beside them, and a snapshot every few seconds
// so that the short demo shows several.
func useIceberg(cfg *config.Config, dir string) {
	cfg.Format.Type = "parquet"
	cfg.File.TimestampSource = "event"
	cfg.Iceberg.Table = icebergTable
	cfg.Iceberg.Catalog.Type = "sql"
	cfg.Iceberg.Catalog.URI = filepath.Join(dir, "catalog.db")
	cfg.Iceberg.PartitionBy = []string{"day(timestamp)"}
	cfg.Iceberg.CommitInterval = config.Default().Iceberg.CommitInterval / 12 // 5s
	cfg.ApplyIcebergLayout()
}

// icebergHint tells where the demo's table is and how to read it.
func icebergHint(cfg *config.Config) string {
	name := tables.TableName(cfg.Iceberg.Table, topic)
	ns, table, _ := config.SplitTable(name)
	loc := tablepath.Location(cfg.Warehouse(), ns, table)
	data := strings.TrimPrefix(loc, "file://") + "/data/**/*.parquet"
	var b strings.Builder
	fmt.Fprintf(&b, "\nIceberg table %s, location %s\n", name, loc)
	fmt.Fprintf(&b, "  its catalog (SQL, in SQLite):  sqlite3 %s \"SELECT table_namespace, table_name, metadata_location FROM iceberg_tables\"\n", cfg.Iceberg.Catalog.URI)
	fmt.Fprintf(&b, "  its data files, with DuckDB:   SELECT count(*) FROM read_parquet('%s');\n", data)
	fmt.Fprintf(&b, "  as a table, with DuckDB's iceberg extension: SELECT count(*) FROM iceberg_scan('<metadata_location from the catalog>');\n")
	return b.String()
}
