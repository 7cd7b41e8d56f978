package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestVerifyTablePastEnd runs `spillway verify` on a table whose
// spillway.offsets run past the topic's log end, as a table written from
// another cluster's topic of the same name says: exit 1, table_past_end
// naming the partition, its offsets and the log end. The table's current
// metadata file is edited in place (its snapshot summary), the only way
// to get such a table from this cluster.
func TestVerifyTablePastEnd(t *testing.T) {
	t.Parallel()
	it := newIceTopic(t, iceSetup{group: "pastend-test"})
	it.produce(0, 1_000)
	it.drain()
	dir, cfgPath := it.dir, it.cfgPath
	code, out, errOut := verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)

	// The current snapshot says partition 0 ends at 5000.
	metaPath := currentMetadata(t, dir)
	editSummary(t, metaPath, func(summary map[string]any) {
		if summary["spillway.offsets"] != `{"events":{"0":500,"1":500}}` {
			t.Fatalf("spillway.offsets = %v before the edit", summary["spillway.offsets"])
		}
		summary["spillway.offsets"] = `{"events":{"0":5000,"1":500}}`
	})
	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitRuntime, out, errOut)
	wantContains(t, "verify output", out,
		"table_past_end", "table kafka.events's current snapshot says it holds events/0 up to 5000 (spillway.offsets), past the log end 500")
	if strings.Contains(out, "events/1 up to") {
		t.Errorf("partition 1, which ends at the log end, was reported:\n%s", out)
	}

	// The same offsets, of another incarnation of the topic (deleted and
	// recreated since): not this topic's, so not past its end; the table
	// holds none of its files yet.
	editSummary(t, metaPath, func(summary map[string]any) {
		summary["spillway.topic_ids"] = `{"events":["an-older-topic-id"]}`
	})
	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "table kafka.events records topic events with id an-older-topic-id, but the topic's id is now",
		"2 files of ledger entries not yet in table kafka.events (it holds up to ledger entry -1)")
}

// currentMetadata is the path of table kafka.events's current metadata
// file, from the SQL catalog in dir.
func currentMetadata(t *testing.T, dir string) string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	var metaLoc string
	err = db.QueryRow(`SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'kafka' AND table_name = 'events'`).Scan(&metaLoc)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(metaLoc, "file://")
}

// editSummary edits, in place, the summary of the current snapshot in
// the metadata file at metaPath.
func editSummary(t *testing.T, metaPath string, edit func(summary map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	edited := false
	for _, s := range meta["snapshots"].([]any) {
		snap := s.(map[string]any)
		if snap["snapshot-id"] == meta["current-snapshot-id"] {
			edit(snap["summary"].(map[string]any))
			edited = true
		}
	}
	if !edited {
		t.Fatalf("no current snapshot in %s", metaPath)
	}
	if raw, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(metaPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
