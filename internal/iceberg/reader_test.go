package iceberg

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/testkit/outside"
)

// The embedded catalog is the standard SQL catalog: its SQLite file holds
// iceberg_tables and iceberg_namespace_properties as the JDBC catalog
// (Spark, Trino, PyIceberg) lays them out. Following the Iceberg spec from
// the metadata file it points at, with readers nobody here wrote
// (python3-avro for the manifest list and manifests, DuckDB for the data
// files), the current snapshot holds every record exactly once, after a
// commit that skipped a zombie's copy.
func TestStandardCatalogIndependentRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	loc := tb.Location()
	commit(t, tb, dataFile(t, loc, "events", 0, 0, 100, ""), dataFile(t, loc, "events", 1, 0, 50, ""))
	commit(t, tb, dataFile(t, loc, "events", 0, 0, 100, "-zombie"), dataFile(t, loc, "events", 0, 100, 130, ""))

	db, err := sql.Open("sqlite", filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var catName, ns, name, metaLoc string
	if err := db.QueryRow(`SELECT catalog_name, table_namespace, table_name, metadata_location FROM iceberg_tables`).Scan(&catName, &ns, &name, &metaLoc); err != nil {
		t.Fatalf("iceberg_tables: %v", err)
	}
	if catName != CatalogName || ns != "kafka" || name != "events" {
		t.Fatalf("iceberg_tables row = %s, %s, %s", catName, ns, name)
	}
	var nsRows int
	if err := db.QueryRow(`SELECT count(*) FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = 'kafka'`, CatalogName).Scan(&nsRows); err != nil || nsRows == 0 {
		t.Fatalf("iceberg_namespace_properties: %d rows, %v", nsRows, err)
	}

	local := func(uri string) string { return strings.TrimPrefix(uri, "file://") }
	raw, err := os.ReadFile(local(metaLoc))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Current   int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID           int64             `json:"snapshot-id"`
			ManifestList string            `json:"manifest-list"`
			Summary      map[string]string `json:"summary"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var list string
	for _, s := range meta.Snapshots {
		if s.ID == meta.Current {
			list = s.ManifestList
			if got := s.Summary[PropOffsets]; got != `{"events":{"0":130,"1":50}}` {
				t.Fatalf("current snapshot's %s = %q", PropOffsets, got)
			}
		}
	}
	if list == "" {
		t.Fatalf("no current snapshot in %s", metaLoc)
	}
	var manifests []string
	for _, r := range outside.ReadAvroPython(t, local(list))[0].Records {
		manifests = append(manifests, local(r["manifest_path"].(string)))
	}
	var paths []string
	var counted float64
	for _, m := range outside.ReadAvroPython(t, manifests...) {
		for _, e := range m.Records {
			if e["status"].(float64) == 2 { // deleted
				continue
			}
			df := e["data_file"].(map[string]any)
			paths = append(paths, outside.SQLString(local(df["file_path"].(string))))
			counted += df["record_count"].(float64)
		}
	}
	if len(paths) != 3 || counted != 180 {
		t.Fatalf("manifests list %d files of %v records, want 3 of 180", len(paths), counted)
	}
	rows := outside.NewDuckDB(t).Query(t, fmt.Sprintf(`SELECT count(*)::DOUBLE AS n, count(DISTINCT (partition, "offset"))::DOUBLE AS d FROM read_parquet([%s])`, strings.Join(paths, ",")))
	if n, d := rows[0][0]["n"], rows[0][0]["d"]; fmt.Sprint(n) != "180" || fmt.Sprint(d) != "180" {
		t.Fatalf("DuckDB reads %v records, %v distinct; want 180 of each", n, d)
	}
}
