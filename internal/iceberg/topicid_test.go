package iceberg

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// incarnation is a data file of topic events, partition 0, of the topic
// incarnation id, with ledger seq seq.
func incarnation(t *testing.T, loc, id string, seq, first, end int64) File {
	t.Helper()
	f := dataFile(t, loc, "events", 0, first, end, "-"+id)
	f.TopicID, f.Seq = id, seq
	return f
}

// A topic deleted and recreated under its name starts its ledger seqs and
// offsets again: its files land in the table (not skipped as held by the
// old incarnation's seqs, nor refused as overlapping its offsets), and a
// file of the old incarnation is refused after.
func TestRecreatedTopic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tb := openTable(t, open(t, sqlOptions("kafka.events"), dir), "kafka.events")
	loc := tb.Location()
	a := []File{incarnation(t, loc, "A", 0, 0, 10), incarnation(t, loc, "A", 1, 10, 20), incarnation(t, loc, "A", 2, 20, 30)}
	commit(t, tb, a...)
	b := []File{incarnation(t, loc, "B", 0, 0, 5), incarnation(t, loc, "B", 1, 5, 8)}
	commit(t, tb, b...)
	// Committed again (a retry): skipped, by B's seqs.
	commit(t, tb, b[1])

	files := dataFiles(t, tb)
	want := []string{a[0].Location, a[1].Location, a[2].Location, b[0].Location, b[1].Location}
	slices.Sort(files)
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Fatalf("data files %v, want %v", files, want)
	}
	ctx := testCtx(t)
	held, err := tb.HeldOf(ctx, "events", "B")
	if err != nil {
		t.Fatal(err)
	}
	if w := map[int32]int64{0: 1}; !maps.Equal(held, w) {
		t.Errorf("HeldOf(B) = %v, want %v", held, w)
	}
	if held, err = tb.HeldOf(ctx, "events", "A"); err != nil || len(held) != 0 {
		t.Errorf("HeldOf(A) = %v, %v; want nothing: the table holds B", held, err)
	}
	next, err := tb.Next(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if w := map[int32]int64{0: 8}; !maps.Equal(next, w) {
		t.Errorf("Next = %v, want %v", next, w)
	}
	if ids := tb.tbl.CurrentSnapshot().Summary.Properties[PropTopicIDs]; ids != `{"events":["B","A"]}` {
		t.Errorf("%s = %s", PropTopicIDs, ids)
	}

	// A writer still on the deleted topic.
	err = tb.Commit(ctx, []File{incarnation(t, loc, "A", 3, 30, 40)})
	if err == nil || !strings.Contains(err.Error(), "which was deleted and recreated since") {
		t.Fatalf("Commit(file of A after B) = %v, want it refused", err)
	}
}

// A table written before spillway.topic_ids (files without a topic id)
// takes its records as the live topic's: a file it holds is skipped, the
// next one added, and the id recorded from then on.
func TestTopicIDOnALegacyTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tb := openTable(t, open(t, sqlOptions("kafka.events"), dir), "kafka.events")
	loc := tb.Location()
	legacy := incarnation(t, loc, "C", 0, 0, 10)
	legacy.TopicID = ""
	commit(t, tb, legacy)
	if _, ok := tb.tbl.CurrentSnapshot().Summary.Properties[PropTopicIDs]; ok {
		t.Fatalf("a file without a topic id recorded %s", PropTopicIDs)
	}
	again := legacy
	again.TopicID = "C"
	commit(t, tb, again, incarnation(t, loc, "C", 1, 10, 20))
	if n := len(dataFiles(t, tb)); n != 2 {
		t.Fatalf("data files: %d, want 2", n)
	}
	held, err := tb.HeldOf(testCtx(t), "events", "C")
	if err != nil {
		t.Fatal(err)
	}
	if w := map[int32]int64{0: 1}; !maps.Equal(held, w) {
		t.Errorf("HeldOf(C) = %v, want %v", held, w)
	}
	if ids := tb.tbl.CurrentSnapshot().Summary.Properties[PropTopicIDs]; ids != `{"events":["C"]}` {
		t.Errorf("%s = %s", PropTopicIDs, ids)
	}
}
