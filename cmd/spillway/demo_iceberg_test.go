package main

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite"
)

// TestDemoIceberg runs `spillway demo --iceberg` and reads its table with
// iceberg-go's own catalog and scan, not Spillway's: the current snapshot
// holds every data file the demo stored, once, and its records are the
// demo's.
func TestDemoIceberg(t *testing.T) {
	out := t.TempDir()
	const records = 6000
	code, stdout, stderr := cli(t, nil, "demo", "--iceberg", "--records", "6000", "--partitions", "2", "--out", out)
	wantCode(t, code, exitOK, stdout, stderr)
	if !strings.Contains(stdout, "Iceberg table demo.demo-events") {
		t.Errorf("no Iceberg hint in stdout:\n%s", stdout)
	}
	runs, err := filepath.Glob(filepath.Join(out, "run-*"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("want one run-* directory under %s, got %v (%v)", out, runs, err)
	}
	dir := runs[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open("sqlite", filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("spillway", db, sqlcat.SQLite, iceberg.Properties{"warehouse": "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{"demo", "demo-events"})
	if err != nil {
		t.Fatalf("LoadTable: %v", err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var inTable []string
	for _, task := range tasks {
		inTable = append(inTable, strings.TrimPrefix(task.File.FilePath(), "file://"))
	}
	var stored []string
	_ = filepath.WalkDir(filepath.Join(dir, "demo.db"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			stored = append(stored, p)
		}
		return nil
	})
	slices.Sort(inTable)
	slices.Sort(stored)
	if len(stored) == 0 || !slices.Equal(inTable, stored) {
		t.Errorf("the table's current snapshot holds\n %v\nwant every stored data file once:\n %v", inTable, stored)
	}
	_, batches, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for b, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		n += b.NumRows()
		b.Release()
	}
	if n != records {
		t.Errorf("iceberg-go's scan reads %d records, want %d", n, records)
	}
}
