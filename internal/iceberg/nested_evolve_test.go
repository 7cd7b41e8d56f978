package iceberg

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// The envelope with a registry-typed value, as Spillway lays it out: the
// envelope's fixed ids, and the value's fields numbered by their paths
// (here any ids of 1000 and up), in three versions of the value's schema.
type (
	nestUserV1 struct {
		ID int64 `parquet:"id,id(1003)"`
	}
	nestValueV1 struct {
		Name string     `parquet:"name,id(1001)"`
		User nestUserV1 `parquet:"user,id(1002)"`
	}
	nestRowV1 struct {
		Key       []byte       `parquet:"key,id(1),optional"`
		Value     *nestValueV1 `parquet:"value,id(2),optional"`
		Offset    int64        `parquet:"offset,id(3)"`
		Timestamp int64        `parquet:"timestamp,id(4),timestamp(microsecond:utc)"`
	}

	// v2 adds the optional value.user.email.
	nestUserV2 struct {
		ID    int64   `parquet:"id,id(1003)"`
		Email *string `parquet:"email,id(1004),optional"`
	}
	nestValueV2 struct {
		Name string     `parquet:"name,id(1001)"`
		User nestUserV2 `parquet:"user,id(1002)"`
	}
	nestRowV2 struct {
		Key       []byte       `parquet:"key,id(1),optional"`
		Value     *nestValueV2 `parquet:"value,id(2),optional"`
		Offset    int64        `parquet:"offset,id(3)"`
		Timestamp int64        `parquet:"timestamp,id(4),timestamp(microsecond:utc)"`
	}

	// v3 adds the required value.user.age.
	nestUserV3 struct {
		ID    int64   `parquet:"id,id(1003)"`
		Email *string `parquet:"email,id(1004),optional"`
		Age   int32   `parquet:"age,id(1005)"`
	}
	nestValueV3 struct {
		Name string     `parquet:"name,id(1001)"`
		User nestUserV3 `parquet:"user,id(1002)"`
	}
	nestRowV3 struct {
		Key       []byte       `parquet:"key,id(1),optional"`
		Value     *nestValueV3 `parquet:"value,id(2),optional"`
		Offset    int64        `parquet:"offset,id(3)"`
		Timestamp int64        `parquet:"timestamp,id(4),timestamp(microsecond:utc)"`
	}
)

func emailOf(o int64) string { return fmt.Sprintf("u%d@example.com", o) }

// A registry schema that gains an optional field inside the value (at
// depth two) adds it to the table, with the id the files give it, in the
// commit of the files that bring it; old rows read it as null, new ones
// as written, through DuckDB and iceberg-go's scan. A version that adds a
// required nested field is refused, naming its path.
func TestNestedSchemaEvolution(t *testing.T) {
	t.Parallel()
	o := sqlOptions("kafka.events")
	o.PartitionBy = nil
	tb := openTable(t, open(t, o, t.TempDir()), "kafka.events")
	loc := tb.Location()

	var v1 []nestRowV1
	for o := int64(0); o < 10; o++ {
		v1 = append(v1, nestRowV1{Value: &nestValueV1{Name: fmt.Sprint("n", o), User: nestUserV1{ID: o}}, Offset: o, Timestamp: ts(o)})
	}
	commit(t, tb, fileOf(t, loc, "events", 0, 0, 10, "", v1))

	var v2 []nestRowV2
	for o := int64(10); o < 20; o++ {
		e := emailOf(o)
		v2 = append(v2, nestRowV2{Value: &nestValueV2{Name: fmt.Sprint("n", o), User: nestUserV2{ID: o, Email: &e}}, Offset: o, Timestamp: ts(o)})
	}
	// An older producer's v1 record after v2's, in the same commit.
	old := []nestRowV1{{Value: &nestValueV1{Name: "n20", User: nestUserV1{ID: 20}}, Offset: 20, Timestamp: ts(20)}}
	commit(t, tb, fileOf(t, loc, "events", 0, 10, 20, "", v2), fileOf(t, loc, "events", 0, 20, 21, "", old))

	tbl, err := tb.refresh(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	email, ok := tbl.Schema().FindFieldByName("value.user.email")
	if !ok || email.ID != 1004 || email.Required || !email.Type.Equals(iceberg.PrimitiveTypes.String) {
		t.Fatalf("table schema %s: want value.user.email, optional string, id 1004", tbl.Schema())
	}
	if snap := tbl.CurrentSnapshot(); snap.SchemaID == nil || *snap.SchemaID != tbl.Schema().ID {
		t.Fatalf("the snapshot's schema id %v, want the new schema's %d", snap.SchemaID, tbl.Schema().ID)
	}

	// iceberg-go's scan: every row, the email null before v2 and after it.
	_, batches, err := tbl.Scan().ToArrowRecords(testCtx(t))
	if err != nil {
		t.Fatalf("ToArrowRecords: %v", err)
	}
	got := map[int64]any{}
	for b, err := range batches {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		offs := b.Column(b.Schema().FieldIndices("offset")[0])
		vals := b.Column(b.Schema().FieldIndices("value")[0])
		for i := range int(b.NumRows()) {
			v := vals.GetOneForMarshal(i).(map[string]any)
			got[offs.GetOneForMarshal(i).(int64)] = v["user"].(map[string]any)["email"]
		}
		b.Release()
	}
	check := func(reader string, got map[int64]any) {
		t.Helper()
		if len(got) != 21 {
			t.Fatalf("%s reads %d records, want 21", reader, len(got))
		}
		for o, e := range got {
			want := any(nil)
			if o >= 10 && o < 20 {
				want = emailOf(o)
			}
			if e != want {
				t.Fatalf("%s: offset %d has email %v, want %v", reader, o, e, want)
			}
		}
	}
	check("iceberg-go", got)

	// DuckDB over the table's files, by name: the files of v1 lack the
	// field, and their rows read it as null.
	var paths []string
	for _, p := range dataFiles(t, tb) {
		paths = append(paths, outside.SQLString(strings.TrimPrefix(p, "file://")))
	}
	slices.Sort(paths)
	rows := outside.NewDuckDB(t).Query(t, fmt.Sprintf(`SELECT "offset" AS o, value.user.email AS e FROM read_parquet([%s], union_by_name = true)`, strings.Join(paths, ",")))
	got = map[int64]any{}
	for _, r := range rows[0] {
		o, err := strconv.ParseInt(fmt.Sprint(r["o"]), 10, 64)
		if err != nil {
			t.Fatalf("DuckDB row %v: %v", r, err)
		}
		got[o] = r["e"]
	}
	check("DuckDB", got)

	// v3 adds a required field: refused, naming it, and the table stays.
	var v3 []nestRowV3
	for o := int64(21); o < 25; o++ {
		v3 = append(v3, nestRowV3{Value: &nestValueV3{Name: "n", User: nestUserV3{ID: o, Age: 3}}, Offset: o, Timestamp: ts(o)})
	}
	err = tb.Commit(testCtx(t), []File{fileOf(t, loc, "events", 0, 21, 25, "", v3)})
	if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `adds the required field "value.user.age"`) {
		t.Fatalf("Commit of a file adding a required nested field: %v; want a refusal naming value.user.age", err)
	}
	after, err := tb.refresh(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.MetadataLocation() != tbl.MetadataLocation() {
		t.Fatalf("a refused commit changed the table: %s, was %s", after.MetadataLocation(), tbl.MetadataLocation())
	}
}
