package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestVerifyIcebergTable drains a topic into an Iceberg table (a real
// SQLite catalog over local storage) and runs `spillway verify` on it:
// clean (exit 0); with an orphan data file (reported, exit 0); with a
// file committed a second time, and a file no ledger entry names, through
// iceberg-go directly, past Spillway's skip rule (exit 1, the files
// named); and with the catalog set
// back to an older snapshot, so that the ledger holds entries the table
// does not yet (reported, exit 0).
func TestVerifyIcebergTable(t *testing.T) {
	t.Parallel()
	it := newIceTopic(t, iceSetup{group: "verify-test"})
	dir, cfgPath := it.dir, it.cfgPath
	it.produce(0, 1_000)
	// The graceful stop commits every stored file to the table.
	it.drain()
	catalogDB := it.catalogDB
	restore := it.saveCatalog()

	// Clean.
	code, out, errOut := verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "table kafka.events (topic events): 4 data files in the current snapshot", "storage is consistent with Kafka")
	if strings.Contains(out, "orphan") || strings.Contains(out, "not yet in table") {
		t.Errorf("clean table reported orphans or entries not in it:\n%s", out)
	}

	// An orphan: a data file under the table's data folder that no ledger
	// entry names, as a writer that crashed after its upload leaves.
	var files []string
	_ = filepath.WalkDir(filepath.Join(dir, "kafka.db", "events", "data"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 4 {
		t.Fatalf("want 4 data files stored, got %v", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	orphanPath := filepath.Join(filepath.Dir(files[0]), "crashed-writer.parquet")
	if err := os.WriteFile(orphanPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath, "--json")
	wantCode(t, code, exitOK, out, errOut)
	var rep struct {
		OK     bool `json:"ok"`
		Tables []struct {
			Files   int `json:"files"`
			Orphans []struct {
				Key   string `json:"key"`
				Bytes int64  `json:"bytes"`
			} `json:"orphans"`
			OrphanBytes int64 `json:"orphan_bytes"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out)
	}
	if !rep.OK || len(rep.Tables) != 1 || len(rep.Tables[0].Orphans) != 1 ||
		!strings.HasSuffix(rep.Tables[0].Orphans[0].Key, "/crashed-writer.parquet") || rep.Tables[0].OrphanBytes != int64(len(data)) {
		t.Errorf("want one orphan crashed-writer.parquet of %d bytes, ok:\n%s", len(data), out)
	}

	// A file committed twice, and the orphan committed, through iceberg-go
	// directly.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	func() {
		tbl, done := it.load(ctx, "events", nil)
		defer done()
		tx := tbl.NewTransaction()
		if err := tx.AddFiles(ctx, []string{"file://" + files[0], "file://" + orphanPath}, nil, true); err != nil {
			t.Fatalf("AddFiles: %v", err)
		}
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}()
	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitRuntime, out, errOut)
	rel, err := filepath.Rel(dir, files[0])
	if err != nil {
		t.Fatal(err)
	}
	orphanRel, err := filepath.Rel(dir, orphanPath)
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, "verify output", out, "table_file_twice: "+rel, "in the current snapshot of table kafka.events 2 times",
		"table_file_unknown: "+orphanRel+" is in the current snapshot of table kafka.events (topic events) but no ledger entry names it")
	restore()
	if err := os.Remove(orphanPath); err != nil {
		t.Fatal(err)
	}

	// Entries not yet in the table: more files stored and committed, then
	// the catalog set back to the snapshot before them.
	it.produce(1_000, 1_000)
	it.drain()
	restore()
	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "2 files of ledger entries not yet in table kafka.events (it holds up to ledger entry 1); the oldest is entry 2", "storage is consistent with Kafka")

	// No catalog yet: verify reads it as no table, and does not create
	// it (opening a SQL catalog creates its file and tables).
	for _, f := range []string{catalogDB, catalogDB + "-wal", catalogDB + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "not yet in table kafka.events (it holds up to ledger entry -1)")
	if _, err := os.Stat(catalogDB); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("verify created the catalog %s (stat: %v)", catalogDB, err)
	}
}
