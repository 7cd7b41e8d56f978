package parquet

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// fileIDs reads a Parquet file's schema back from its footer and returns
// each node's field id by the path of fieldIDs (a LIST's "list" and a
// MAP's "key_value" groups, which Iceberg gives no id, left out of the
// path); such a group with an id, or any other node without one, fails t.
func fileIDs(t *testing.T, b []byte) map[string]int {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	elems := f.Metadata().Schema
	ids := map[string]int{}
	i := 1 // elems[0] is the root
	var walk func(parent string, n int)
	walk = func(parent string, n int) {
		for range n {
			e := elems[i]
			i++
			path := joinPath(parent, e.Name)
			rt, _ := e.RepetitionType.Get()
			wrapper := rt == pqformat.Repeated && (e.Name == "list" || e.Name == "key_value")
			if wrapper {
				path = parent
				if e.FieldID != 0 {
					t.Errorf("the repeated group %s.%s has field id %d; Iceberg gives it none", parent, e.Name, e.FieldID)
				}
			} else {
				if e.FieldID == 0 {
					t.Errorf("%s has no field id", path)
				}
				ids[path] = int(e.FieldID)
			}
			kids, _ := e.NumChildren.Get()
			walk(path, int(kids))
		}
	}
	kids, _ := elems[0].NumChildren.Get()
	walk("", int(kids))
	if seen := map[int]string{}; true {
		for p, id := range ids {
			if other, dup := seen[id]; dup {
				t.Errorf("%s and %s share field id %d", p, other, id)
			}
			seen[id] = p
		}
	}
	return ids
}

// TestFieldIDsEnvelope: the envelope's columns carry their fixed ids,
// headers' element, key and value included, bytes or typed.
func TestFieldIDsEnvelope(t *testing.T) {
	t.Parallel()
	want := map[string]int{"key": 1, "value": 2, "offset": 3, "timestamp": 4, "headers": 5, "headers.element": 6, "headers.element.key": 7, "headers.element.value": 8}
	for _, enc := range []string{"none", "base64"} {
		b := encodeParquet(t, formattest.ColumnarCase{Cfg: formattest.ColumnarConfig("parquet", "none", enc), Recs: formattest.ColumnarRecords(false)})
		if got := fileIDs(t, b); !maps.Equal(got, want) {
			t.Errorf("value_encoding %s: ids %v, want %v", enc, got, want)
		}
	}
}

// Two versions of one value schema: v2 inserts a field before the others
// and a nested field, removes one, and adds a map and a list, which is
// how a registry subject evolves.
const (
	idsV1 = `{"type":"record","name":"Ev","fields":[
 {"name":"id","type":"long"},
 {"name":"user","type":{"type":"record","name":"U","fields":[{"name":"name","type":"string"},{"name":"tags","type":{"type":"array","items":"string"}}]}},
 {"name":"gone","type":["null","string"],"default":null},
 {"name":"note","type":["null","string"],"default":null}]}`
	idsV2 = `{"type":"record","name":"Ev","fields":[
 {"name":"first","type":["null","int"],"default":null},
 {"name":"id","type":"long"},
 {"name":"user","type":{"type":"record","name":"U","fields":[{"name":"age","type":["null","int"],"default":null},{"name":"name","type":"string"},{"name":"tags","type":{"type":"array","items":"string"}}]}},
 {"name":"attrs","type":{"type":"map","values":{"type":"record","name":"A","fields":[{"name":"v","type":"string"}]}},"default":{}},
 {"name":"note","type":["null","string"],"default":null}]}`
)

// typedFile encodes an empty file of value schema id 1 or 2 (idsV1,
// idsV2) with cfg.
func typedFile(t *testing.T, cfg config.Format, id int) []byte {
	t.Helper()
	reg, err := registry.NewCached("value", map[int]sr.Schema{1: {Type: sr.TypeAvro, Schema: idsV1}, 2: {Type: sr.TypeAvro, Schema: idsV2}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc, err := format.NewTyped(Kind(), cfg, reg).NewEncoder(&buf, fmt.Sprintf("k-1 v%d", id))
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFieldIDsStableAcrossVersions: in the bare and the envelope layout,
// every column of a typed file has an id, nested ones included; a column
// of v1 that v2 keeps has the same id in both, and v2's new columns have
// ids v1 never used. Ids counted in order of appearance fail it: v2's
// first field would take id's.
func TestFieldIDsStableAcrossVersions(t *testing.T) {
	t.Parallel()
	layouts := map[string]config.Format{
		"bare":     {Type: "parquet", Compression: "none", Fields: []string{"value"}, ValueEncoding: "none"},
		"envelope": {Type: "parquet", Compression: "none", Fields: formattest.AllFields(), ValueEncoding: "none", Envelope: true},
	}
	for name, cfg := range layouts {
		v1, v2 := fileIDs(t, typedFile(t, cfg, 1)), fileIDs(t, typedFile(t, cfg, 2))
		prefix := ""
		if name == "envelope" {
			prefix = "value."
			if v1["value"] != 2 || v2["value"] != 2 || v1["offset"] != 3 {
				t.Errorf("%s: envelope ids value %d/%d, offset %d; want 2 and 3", name, v1["value"], v2["value"], v1["offset"])
			}
		}
		for _, p := range []string{"id", "user", "user.name", "user.tags", "user.tags.element", "note"} {
			p = prefix + p
			if v1[p] == 0 || v1[p] != v2[p] {
				t.Errorf("%s: %s has id %d in v1 and %d in v2", name, p, v1[p], v2[p])
			}
		}
		old := slices.Collect(maps.Values(v1))
		for _, p := range []string{"first", "user.age", "attrs", "attrs.key", "attrs.value", "attrs.value.v"} {
			p = prefix + p
			if v2[p] == 0 || slices.Contains(old, v2[p]) {
				t.Errorf("%s: v2's new column %s has id %d (v1's ids: %v)", name, p, v2[p], v1)
			}
		}
		if _, ok := v2[prefix+"gone"]; ok {
			t.Errorf("%s: v2 has v1's removed column", name)
		}
	}
}

// TestFieldIDsCollision: two paths of one schema whose hashes meet are
// refused, naming both, rather than one of them moved.
func TestFieldIDsCollision(t *testing.T) {
	t.Parallel()
	var f fieldIDs
	if _, err := f.id("a"); err != nil {
		t.Fatal(err)
	}
	f.seen[hashID("b")] = "a.b" // as if a.b had hashed to b's id
	_, err := f.id("b")
	if err == nil || !strings.Contains(err.Error(), "a.b and b") {
		t.Errorf("a collision gave %v, want an error naming both columns", err)
	}
}

// TestFieldIDsDuckDB: DuckDB, a reader that doesn't use Iceberg ids,
// reads typed files with them (nested groups, lists, maps), and shows
// the ids it read in parquet_schema.
func TestFieldIDsDuckDB(t *testing.T) {
	t.Parallel()
	db := outside.NewDuckDB(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "v2.parquet")
	cfg := config.Format{Type: "parquet", Compression: "zstd", Fields: []string{"value"}, ValueEncoding: "none"}
	if err := os.WriteFile(path, typedFile(t, cfg, 2), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fileIDs(t, typedFile(t, cfg, 2))
	p := formattest.DuckPath(t, path)
	out := db.Query(t, "SELECT name, field_id FROM parquet_schema('"+p+"') WHERE field_id IS NOT NULL", "SELECT count(*) AS n FROM read_parquet('"+p+"')")
	got := map[string]int{}
	for _, r := range out[0] {
		var id int
		_, _ = fmt.Sscan(fmt.Sprint(r["field_id"]), &id)
		got[fmt.Sprint(r["name"])] = id
	}
	for path, id := range want {
		leaf := path[strings.LastIndex(path, ".")+1:]
		if leaf == "value" || leaf == "key" || leaf == "element" {
			continue // names that repeat in the file; parquet_schema gives names only
		}
		if got[leaf] != id {
			t.Errorf("DuckDB read %s's field id as %d, want %d", path, got[leaf], id)
		}
	}
	if n := fmt.Sprint(out[1][0]["n"]); n != "0" {
		t.Errorf("DuckDB counted %s rows in an empty file", n)
	}
}
