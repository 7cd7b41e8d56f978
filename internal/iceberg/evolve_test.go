package iceberg

import (
	"context"
	"slices"
	"testing"
)

// A file that brings a new optional field adds the column in the same
// catalog commit as the snapshot that adds the file: a commit that fails
// leaves the table's schema as it was, and the one that succeeds writes
// one metadata file with both.
func TestEvolutionInTheDataCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	loc := tb.Location()
	commit(t, tb, dataFile(t, loc, "events", 0, 0, 10, ""))
	before, err := tb.refresh(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}

	extra := "x"
	v2 := make([]rowV2, 0, 10)
	for o := int64(10); o < 20; o++ {
		v2 = append(v2, rowV2{Partition: 0, Offset: o, Timestamp: ts(o), Extra: &extra})
	}
	f := fileOf(t, loc, "events", 0, 10, 20, "", v2)

	// The catalog commit fails (as a crash before it would leave it):
	// the column must not be there.
	ctx, cancel := context.WithCancel(testCtx(t))
	tb.beforeCommit = cancel
	if err := tb.Commit(ctx, []File{f}); err == nil {
		t.Fatal("Commit with its context canceled before the catalog commit succeeded")
	}
	tb.beforeCommit = nil
	after, err := tb.refresh(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after.Schema().FindFieldByName("extra"); ok || after.MetadataLocation() != before.MetadataLocation() {
		t.Fatalf("a failed commit changed the table: schema %s, metadata %s (was %s)", after.Schema(), after.MetadataLocation(), before.MetadataLocation())
	}

	commit(t, tb, f)
	now, err := tb.refresh(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if fld, ok := now.Schema().FindFieldByName("extra"); !ok || fld.ID != 6 || fld.Required {
		t.Fatalf("table schema %s: want optional extra with id 6", now.Schema())
	}
	// One metadata file after the one before: the schema and the
	// snapshot came in one commit.
	log := slices.Collect(now.Metadata().PreviousFiles())
	if len(log) == 0 || log[len(log)-1].MetadataFile != before.MetadataLocation() {
		t.Fatalf("metadata log %v: want the new metadata right after %s", log, before.MetadataLocation())
	}
	snap := now.CurrentSnapshot()
	if snap.SchemaID == nil || *snap.SchemaID != now.Schema().ID {
		t.Fatalf("the snapshot's schema id %v, want the new schema's %d", snap.SchemaID, now.Schema().ID)
	}
	if recs, _ := scanCount(t, tb); recs != 20 {
		t.Fatalf("scan: %d records, want 20", recs)
	}
}
