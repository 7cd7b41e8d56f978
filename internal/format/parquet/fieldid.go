package parquet

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Iceberg field ids. Every column of a Spillway Parquet file, nested ones
// included (a LIST's element, a MAP's key and value), carries a Parquet
// field_id, which Apache Iceberg reads columns by; without them a file
// can't be registered in a table. Readers that don't use ids ignore them
// (DuckDB and parquet-go read the files as before: TestFieldIDsDuckDB).
//
// The rule, the same in every process and for every schema version:
//
//   - The envelope's columns have fixed ids: key 1, value 2, offset 3,
//     timestamp 4, headers 5, its element 6, the header's key 7 and value 8,
//     partition 9 (envelopeIDs; 9 is the id Iceberg tables gave the Kafka
//     partition's column before the files held it). They hold whether key
//     and value are bytes, strings or typed groups.
//   - Every other column (the fields of a registry-typed key or value, and
//     every column of the bare layout, where the value's fields are the
//     file's columns) has the id hashID gives its path: the names from the
//     file's root joined by ".", "element" for a list's item, "key" and
//     "value" for a map's. A column keeps its id in every schema version
//     that keeps its path, whatever is added or removed around it, and a
//     new column gets the id of its own path, unlike ids counted in order
//     of appearance, which a field inserted before it would shift.
//
// Hashed ids fall in [hashIDFirst, hashIDFirst+hashIDSpan), above the
// fixed ones and far below 2^31, so that an engine that adds a column to
// the table (last-column-id + 1) does not overflow. Two paths of one
// schema with the same hash are refused when the file is opened, naming
// both: for n columns it happens with odds of about n²/2^31 (1 in 200,000
// for 100 columns), and a rule that moved one of them would break the
// other's stability. A table must keep these ids as they are: a catalog
// that gives a new table fresh ids (1, 2, ...) would no longer match the
// files, so the table is created from the file's ids, not renumbered.
const (
	hashIDFirst = 1000
	hashIDSpan  = 1 << 30
)

// envelopeIDs are the envelope columns' fixed ids, by path.
var envelopeIDs = map[string]int{
	"key": 1, "value": 2, "offset": 3, "timestamp": 4,
	"headers": 5, "headers.element": 6, "headers.element.key": 7, "headers.element.value": 8,
	"partition": 9,
}

// hashID is the id of a column that has no fixed one: FNV-1a of its path.
func hashID(path string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(path))
	return hashIDFirst + int(h.Sum32()%hashIDSpan)
}

// fieldIDs hands out the ids of one file's schema and refuses a collision.
type fieldIDs struct {
	envelope bool           // the envelope's fixed ids apply
	seen     map[int]string // id → path
}

// id is the field id of the column at path (see the rule above).
func (f *fieldIDs) id(path string) (int, error) {
	id, ok := 0, false
	if f.envelope {
		id, ok = envelopeIDs[path]
	}
	if !ok {
		id = hashID(path)
	}
	if f.seen == nil {
		f.seen = map[int]string{}
	}
	if other, dup := f.seen[id]; dup && other != path {
		return 0, fmt.Errorf("columns %s and %s would share the Iceberg field id %d; rename one of them", other, path, id)
	}
	f.seen[id] = path
	return id, nil
}

// with wraps n in its field id.
func (f *fieldIDs) with(n parquet.Node, path string) (parquet.Node, error) {
	id, err := f.id(path)
	if err != nil {
		return nil, err
	}
	return parquet.FieldID(n, id), nil
}

// joinPath is the path of child name under parent.
func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return strings.Join([]string{parent, name}, ".")
}

// envelopeID is the fixed id of an envelope column; the envelope schema
// has no other columns.
func envelopeID(n parquet.Node, path string) parquet.Node {
	return parquet.FieldID(n, envelopeIDs[path])
}
