package outside

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/testkit"
)

// DuckDB reads Spillway's output files with DuckDB, a reader nobody here
// wrote: the npm package @duckdb/node-api (prebuilt binaries) that
// scripts/test.sh installs into .cache/duckdb at the repository root. Each
// Query runs one node process with an in-memory database.
type DuckDB struct {
	node    string // the node binary
	modules string // .cache/duckdb/node_modules
	script  string // duckdbQueryJS, written once per test
}

// duckdbDir is where scripts/test.sh installs @duckdb/node-api, relative
// to the repository root.
const duckdbDir = ".cache/duckdb"

// duckdbQueryJS runs the SQL statements given as JSON on stdin and prints
// one JSON array of row objects per statement. Extensions are never
// installed or loaded from the network: csv, json, parquet and zstd are
// built into the npm package. getRowObjectsJson gives BIGINT and other
// wide values as strings, and NULL as null.
const duckdbQueryJS = `'use strict';
const { DuckDBInstance } = require(process.argv[2] + '/@duckdb/node-api');
(async () => {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const queries = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const db = await DuckDBInstance.create(':memory:', {
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
  });
  const con = await db.connect();
  const out = [];
  for (const q of queries) {
    const reader = await con.runAndReadAll(q);
    out.push(reader.getRowObjectsJson());
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
`

// NewDuckDB finds node and the DuckDB package. When either is missing the
// test is skipped, or fails if SPILLWAY_TEST_REQUIRE_TOOLS=1.
func NewDuckDB(t testing.TB) *DuckDB {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testkit.MissingTool(t, fmt.Sprintf("node is not installed (%v)", err))
		return nil
	}
	root, err := testkit.FindRepoRoot()
	if err != nil {
		testkit.MissingTool(t, err.Error())
		return nil
	}
	modules := filepath.Join(root, duckdbDir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@duckdb", "node-api", "package.json")); err != nil {
		testkit.MissingTool(t, fmt.Sprintf("@duckdb/node-api is not installed in %s", filepath.Join(root, duckdbDir)))
		return nil
	}
	script := filepath.Join(t.TempDir(), "duckdb-query.cjs")
	if err := os.WriteFile(script, []byte(duckdbQueryJS), 0o600); err != nil {
		t.Fatalf("outside.NewDuckDB: %v", err)
	}
	return &DuckDB{node: node, modules: modules, script: script}
}

// Row is one result row: column name to value as DuckDB's JSON gives it
// (strings for text and 64-bit integers, json.Number for small numbers,
// nil for NULL).
type Row map[string]any

// Query runs each SQL statement in one DuckDB session and returns their
// rows, one slice per statement. A statement that fails fails the test with
// DuckDB's message.
func (d *DuckDB) Query(t testing.TB, sql ...string) [][]Row {
	t.Helper()
	in, err := json.Marshal(sql)
	if err != nil {
		t.Fatalf("outside.DuckDB.Query: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.node, d.script, d.modules)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("outside.DuckDB.Query: %v\nqueries:\n%s\nstderr:\n%s", err, strings.Join(sql, "\n"), stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	var out [][]Row
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("outside.DuckDB.Query: decoding DuckDB's output: %v\nstdout: %.500s", err, stdout.String())
	}
	if len(out) != len(sql) {
		t.Fatalf("outside.DuckDB.Query: %d results for %d statements", len(out), len(sql))
	}
	return out
}

// SQLString quotes s as a SQL string literal, for file paths in queries.
func SQLString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
