package testkit

import (
	"path/filepath"
	"testing"
)

// TestReadStoredOffsets: the readjsonl program and ReadStoredOffsets'
// parsing give what ReadJSONL gives in this process (file, line, topic,
// partition, offset), and a file ReadJSONL refuses fails it, naming it.
func TestReadStoredOffsets(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "readjsonl")
	if err := GoBuild(bin, ReadJSONLProgram, false); err != nil {
		t.Fatal(err)
	}
	dir := fakeOutput(t)
	want := ReadJSONL(t, dir)
	got := ReadStoredOffsets(t, bin, dir)
	if len(got) != len(want) {
		t.Fatalf("ReadStoredOffsets: %d records, ReadJSONL %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].File != w.File || got[i].Line != w.Line || got[i].Topic != w.Topic ||
			got[i].Partition != w.Partition || got[i].Offset != w.Offset || got[i].ValueDigest != ValueDigest(w.Value) {
			t.Fatalf("record %d: ReadStoredOffsets %+v, ReadJSONL %+v", i, got[i], w)
		}
	}

	// The digest tells text from JSON, and compacts JSON as produced.
	if ValueDigest([]byte(`"{\"a\":1}"`)) != TextDigest([]byte(`{"a":1}`)) ||
		ValueDigest([]byte(`{"a":1}`)) != JSONDigest([]byte("{ \"a\" : 1 }")) ||
		ValueDigest([]byte(`"{\"a\":1}"`)) == ValueDigest([]byte(`{"a":1}`)) {
		t.Errorf("ValueDigest confuses text and JSON, or does not compact")
	}

	writeFile(t, filepath.Join(dir, "orders-eu-2-0.jsonl"), []byte("{\"offset\":0}\nnot json\n"))
	if rec := capture(t, func(tb testing.TB) { ReadStoredOffsets(tb, bin, dir) }); !rec.Failed() {
		t.Errorf("ReadStoredOffsets accepted a file with a line that is not JSON")
	} else {
		t.Logf("refused as it should: %s", rec.text())
	}
}
