package iceberg

import "testing"

// TestExpireKeepsSpillwaysNewest commits five Spillway snapshots, then
// two of another engine on top (appends without Spillway's summary, as
// a compaction or a manual insert leaves), and expires keeping the last
// one at any age: the two foreign ones and the newest Spillway snapshot
// under them stay, the four older ones go, and the table still says
// what it holds (Held, Next), so a restart skips the files it has and
// adds the next. The data files all stay in the current snapshot: they
// are not deleted with the snapshots that added them.
func TestExpireKeepsSpillwaysNewest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := sqlOptions("kafka.events")
	o.ExpireSnapshots = ExpireOptions{Enabled: true, MaxAge: 0, KeepLast: 1}
	tb := openTable(t, open(t, o, dir), "kafka.events")
	loc := tb.Location()
	var files []File
	for i := range int64(5) {
		f := dataFile(t, loc, "events", 0, 10*i, 10*i+10, "")
		files = append(files, f)
		commit(t, tb, f)
	}
	ctx := testCtx(t)
	for i := range 2 {
		tbl, err := tb.refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		foreign := dataFile(t, loc, "other", 0, int64(i), int64(i+1), "")
		tx := tbl.NewTransaction()
		if err := tx.AddFiles(ctx, []string{foreign.Location}, nil, true); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n, err := tb.Expire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := tb.refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tbl.Metadata().Snapshots()); n != 4 || got != 3 {
		t.Errorf("expired %d snapshots, %d left; want 4 expired, 3 left (2 foreign, Spillway's newest)", n, got)
	}
	held, err := tb.Held(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	next, err := tb.Next(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if held[0] != 40 || next[0] != 50 {
		t.Errorf("after expiry the table holds ledger seq %v, offsets up to %v; want 40, 50", held, next)
	}
	// A restart's commit: the held files skipped, the next one added.
	commit(t, tb, append(files, dataFile(t, loc, "events", 0, 50, 60, ""))...)
	got := dataFiles(t, tb)
	if len(got) != 8 {
		t.Errorf("the current snapshot holds %d files, want 8 (6 of events, 2 of the other engine): %v", len(got), got)
	}
	// Nothing to expire: no catalog commit, the metadata file stays.
	cur, err := tb.refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o.ExpireSnapshots.KeepLast = 100
	tb2 := openTable(t, open(t, o, dir), "kafka.events")
	if n, err := tb2.Expire(ctx); err != nil || n != 0 {
		t.Errorf("Expire with keep_last 100: %d, %v; want 0, nil", n, err)
	}
	if after, err := tb2.refresh(ctx); err != nil || after.MetadataLocation() != cur.MetadataLocation() {
		t.Errorf("an expiry with nothing to expire moved the metadata file (%v)", err)
	}
}
