package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	_ "modernc.org/sqlite"

	"github.com/spillway/spillway/internal/testkit"
)

// TestIcebergAzureTable drains a topic through the real runner into an
// Iceberg table whose storage is an Azure container (Azurite, storage.url
// azblob://container, the account and its credentials from
// AZURE_STORAGE_CONNECTION_STRING alone), with a local SQLite catalog:
// the table, read back through iceberg-go's own catalog and scan at its
// abfs:// location (a second opinion on what Spillway committed), holds
// every record once, and verify, which maps the table's abfs:// file
// locations back to the container's keys, finds it clean. Not parallel:
// the Azure credentials are read from the process environment
// (t.Setenv).
func TestIcebergAzureTable(t *testing.T) {
	conn := needEmulator(t, "SPILLWAY_TEST_AZURE_CONNECTION_STRING")
	// The Azure SDK's keep-alive connections end with Azurite's 1 s
	// keep-alive timeout (scripts/test.sh), before goleak looks.
	testkit.WaitIdleConns(t)
	for _, v := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGEBLOB_CONNECTIONSTRING", "AZURE_STORAGE_DOMAIN", "AZURE_STORAGE_PROTOCOL"} {
		t.Setenv(v, "")
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
	account := testkit.AzureConnField(conn, "AccountName")
	_, name := createAzureContainer(t, conn, "spillway-ice-")

	const n = 1_000
	catalogDB := filepath.Join(t.TempDir(), "catalog.db")
	it := newIceTopic(t, iceSetup{group: "iceberg-azure", storage: fmt.Sprintf(`{url: "azblob://%s", prefix: "lake/"}`, name), catalogDB: catalogDB})
	it.produce(0, n)
	// The graceful stop commits every stored file to the table.
	it.drain()

	// The second opinion: iceberg-go alone, given the warehouse as any
	// engine would name it and the connection string as its adls property.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wh := "abfs://" + name + "@" + account + ".dfs.core.windows.net/lake"
	tbl, done := it.load(ctx, "events", iceberg.Properties{"warehouse": wh, "adls.connection-string." + account: conn})
	defer done()
	if want := wh + "/kafka.db/events"; tbl.Location() != want {
		t.Errorf("table location %s, want %s", tbl.Location(), want)
	}
	files := 0
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatalf("PlanFiles: %v", err)
	}
	for _, task := range tasks {
		if p := task.File.FilePath(); !strings.HasPrefix(p, wh+"/kafka.db/events/data/") {
			t.Errorf("data file %s is not under the table's abfs:// data folder", p)
		}
		files++
	}
	if files != 4 {
		t.Errorf("%d data files in the table, want 4 (1000 records, 250 a file)", files)
	}
	_, batches, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("ToArrowRecords: %v", err)
	}
	// Record i went to partition i%2 at offset i/2 and reads {"i":i}.
	seen := map[int64]int{}
	for b, err := range batches {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		vals := b.Column(b.Schema().FieldIndices("value")[0])
		offs := b.Column(b.Schema().FieldIndices("offset")[0])
		for i := range int(b.NumRows()) {
			var k int64
			if _, err := fmt.Sscanf(fmt.Sprintf("%s", vals.GetOneForMarshal(i)), `{"i":%d}`, &k); err != nil {
				t.Fatalf("value %v: %v", vals.GetOneForMarshal(i), err)
			}
			if o := offs.GetOneForMarshal(i).(int64); o != k/2 {
				t.Errorf("record %d at offset %d, want %d", k, o, k/2)
			}
			seen[k]++
		}
		b.Release()
	}
	for k := range int64(n) {
		if c := seen[k]; c != 1 {
			t.Errorf("record %d is in the table %d times, want once", k, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct records in the table, want %d", len(seen), n)
	}

	code, out, errOut := cli(t, nil, "verify", "--config", it.cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "table kafka.events (topic events): 4 data files in the current snapshot", "storage is consistent with Kafka")
	for _, bad := range []string{"orphan", "not yet in table", "table_file_"} {
		if strings.Contains(out, bad) {
			t.Errorf("verify of a clean table reported %q:\n%s", bad, out)
		}
	}
	if strings.Contains(out+errOut, testkit.AzureConnField(conn, "AccountKey")) {
		t.Error("verify printed the account key")
	}
}
