package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestVerifyRemoveOrphans drains a topic into an Iceberg table (a real
// SQLite catalog over local storage) and runs `spillway verify
// --remove-orphans` over a data folder that holds, besides the table's
// files: an old orphan (removed), a young one (kept until --older-than
// passes it), a file only an older snapshot references (kept), and
// files the ledger names that no snapshot holds yet (kept). --dry-run
// removes nothing.
func TestVerifyRemoveOrphans(t *testing.T) {
	t.Parallel()
	it := newIceTopic(t, iceSetup{group: "orphans-test"})
	dir, cfgPath := it.dir, it.cfgPath
	it.produce(0, 1_000)
	it.drain()
	restore := it.saveCatalog()
	// Four files more in the ledger, then the catalog set back to before
	// them: files the ledger names that no snapshot references.
	it.produce(1_000, 1_000)
	it.drain()
	restore()
	dataDir := filepath.Join(dir, "kafka.db", "events", "data")
	ledgerFiles := parquetFiles(t, dataDir)
	if len(ledgerFiles) != 8 {
		t.Fatalf("want 8 data files stored, got %v", ledgerFiles)
	}
	data, err := os.ReadFile(ledgerFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string) string {
		p := filepath.Join(filepath.Dir(ledgerFiles[0]), name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldOrphan, youngOrphan, oldSnap := put("crashed-old.parquet"), put("crashed-young.parquet"), put("older-snapshot.parquet")

	// A file only an older snapshot references: added, then replaced
	// away, through iceberg-go directly.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	func() {
		tbl, done := it.load(ctx, "events", nil)
		defer done()
		tx := tbl.NewTransaction()
		if err := tx.AddFiles(ctx, []string{"file://" + oldSnap}, nil, true); err != nil {
			t.Fatalf("AddFiles: %v", err)
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		tx = tbl.NewTransaction()
		if err := tx.ReplaceDataFiles(ctx, []string{"file://" + oldSnap}, nil, nil); err != nil {
			t.Fatalf("ReplaceDataFiles: %v", err)
		}
		if _, err = tx.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}()

	// Everything but the young orphan was written four days ago.
	old := time.Now().Add(-96 * time.Hour)
	for _, p := range append(parquetFiles(t, dataDir), oldOrphan) {
		if p != youngOrphan {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	wantFiles := func(want ...string) {
		t.Helper()
		got := parquetFiles(t, dataDir)
		for _, w := range want {
			if _, err := os.Stat(w); err != nil {
				t.Errorf("%s is gone (%v); data files now: %v", rel(w), err, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("data files: %d, want %d: %v", len(got), len(want), got)
		}
	}
	all := append([]string{oldOrphan, youngOrphan, oldSnap}, ledgerFiles...)

	// Dry run: names the old orphan with its size, removes nothing.
	code, out, errOut := cli(t, nil, "verify", "--config", cfgPath, "--remove-orphans", "--dry-run")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify --remove-orphans --dry-run", out,
		fmt.Sprintf("orphan would remove: %s (%d bytes)", rel(oldOrphan), len(data)),
		fmt.Sprintf("orphan kept: %s (%d bytes)", rel(youngOrphan), len(data)),
		fmt.Sprintf("orphans: would remove 1 files, %d bytes; kept 1 younger than 72h0m0s", len(data)))
	wantFiles(all...)

	code, out, errOut = cli(t, nil, "verify", "--config", cfgPath, "--remove-orphans")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify --remove-orphans", out,
		fmt.Sprintf("orphan removed: %s (%d bytes)", rel(oldOrphan), len(data)),
		fmt.Sprintf("orphans: removed 1 files, %d bytes; kept 1 younger than 72h0m0s", len(data)))
	if strings.Contains(out, rel(oldSnap)) {
		t.Errorf("a file an older snapshot references was listed as an orphan:\n%s", out)
	}
	wantFiles(all[1:]...)

	// Once it is old enough, the young one goes too.
	code, out, errOut = cli(t, nil, "verify", "--config", cfgPath, "--remove-orphans", "--older-than", "0s")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify --remove-orphans --older-than 0s", out, fmt.Sprintf("orphan removed: %s (%d bytes)", rel(youngOrphan), len(data)))
	wantFiles(all[2:]...)

	// Flags that need --remove-orphans, and a config without a table.
	code, out, errOut = cli(t, nil, "verify", "--config", cfgPath, "--dry-run")
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "verify --dry-run", errOut, "--dry-run and --older-than go with --remove-orphans")
}

func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
