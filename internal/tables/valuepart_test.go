package tables

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format/fieldread"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// The registered schemas: id 1, and id 3, an older version without the
// optional country: its records go to the null partition, and the table
// takes their files, whose value struct lacks country (it reads null).
const (
	orderV0 = `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},
		{"name":"user","type":{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}},
		{"name":"created","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"pad","type":"string"}]}`
	orderV1 = `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},
		{"name":"country","type":["null","string"],"default":null},
		{"name":"user","type":{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}},
		{"name":"created","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"pad","type":"string"}]}`
	orderV2 = `{"type":"record","name":"Order","fields":[
		{"name":"id","type":"long"},
		{"name":"country","type":["null","string"],"default":null},
		{"name":"user","type":{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}},
		{"name":"created","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"pad","type":"string"},
		{"name":"note","type":["null","string"],"default":null}]}`
)

// countries are the records' countries: null, and values whose folder
// has '%' escapes (non-ASCII letters, an apostrophe, a space, '/', '%',
// '=', and the string "null", which renders %6Eull): the manifest keeps
// the location as written, and the commit loop must open that file
// (iceberg.ioLocation), or it fails on every restart.
var countries = []any{"FR", "Österreich", nil, "NEW ZEALAND", "Côte d'Ivoire", "a/b", "50%", "k=v", "null", "DE"}

// orderOf is the value of record o of Kafka partition p, in the wire
// format (schema id 2 every eleventh), and its fields as the table holds
// them: its country, its user id and its creation time (two
// days).
func orderOf(t *testing.T, p int32, o int64) ([]byte, any, int64, time.Time) {
	id := int64(p)*1000 + o
	country := countries[(o+int64(p))%int64(len(countries))]
	user := (o * 7919) % 97
	created := day1.Add(time.Duration(o) * time.Minute)
	if o%4 >= 2 {
		created = created.Add(24 * time.Hour)
	}
	sid, schema := 1, orderV1
	m := map[string]any{"id": id, "country": country, "user": map[string]any{"id": user}, "created": created, "pad": strings.Repeat("x", int(o%5))}
	if o%13 == 12 {
		sid, schema, country = 3, orderV0, nil
		delete(m, "country")
	}
	b, err := avro.MustParse(schema).Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	wire, err := h.AppendEncode(nil, sid, nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(wire, b...), country, user, created
}

// TestSinkValuePartitionedTables writes Avro values (two schema versions,
// one record not registry-encoded) through the real sink, with the
// registry-typed envelope, the ledger and the commit loop, into tables
// partitioned by fields of the value, laid out as run lays them out; then
// python3-avro reads the manifests and DuckDB each file, and every record
// must be in the table once, in the file whose manifest partition value
// and folder are iceberg-go's transform of the record's field.
func TestSinkValuePartitionedTables(t *testing.T) {
	t.Parallel()
	duck := outside.NewDuckDB(t)
	outside.PythonAvro(t)
	for _, by := range [][]string{{"country"}, {"bucket(4,user.id)", "day(created)"}, {"truncate(1,country)", "hour(created)"}} {
		t.Run(strings.Join(by, ","), func(t *testing.T) {
			t.Parallel()
			dir, n, skipped := writeValuePartitioned(t, by)
			if skipped != 1 {
				t.Errorf("%d records skipped, want the one not registry-encoded", skipped)
			}
			checkValuePartitioned(t, duck, dir, by, n)
		})
	}
}

func writeValuePartitioned(t *testing.T, by []string) (string, int, int64) {
	reg, err := registry.NewCached("value", map[int]sr.Schema{1: {Type: sr.TypeAvro, Schema: orderV1}, 2: {Type: sr.TypeAvro, Schema: orderV2}, 3: {Type: sr.TypeAvro, Schema: orderV0}})
	if err != nil {
		t.Fatal(err)
	}
	pq := config.Format{Type: "parquet", Compression: "none", Fields: []string{"key", "value", "offset", "timestamp"}, ValueEncoding: "none", Envelope: true, Micros: true}
	const perPartition = 66
	dir, stats := runPartitioned(t, by, perPartition, func(tmpl *naming.Template, c *sink.Config) {
		c.MaxRecords = 5
		c.Schemas = formats.NewTyped(pq, reg)
		c.Fields = fieldread.New(reg, tmpl.FieldPaths())
		c.Policy = errpolicy.Policy{Tolerance: "all"}
	}, func(p int32, o int64) *kgo.Record {
		v, _, _, _ := orderOf(t, p, o)
		if p == 1 && o == 33 {
			v = []byte("not in the wire format")
		}
		return &kgo.Record{Topic: "t", Partition: p, Offset: o, Value: v, Timestamp: day1}
	})
	return dir, 2*perPartition - 1, stats.Skipped
}

// icebergValue is iceberg-go's transform tr (as the metadata names it) of
// v, as python3-avro reads it from a manifest: numbers as float64, a day
// as its date, a string as itself, null as nil.
func icebergValue(t *testing.T, tr string, v any) any {
	if v == nil {
		return nil
	}
	it, err := iceberggo.ParseTransform(tr)
	if err != nil {
		t.Fatal(err)
	}
	var lit iceberggo.Literal
	switch x := v.(type) {
	case string:
		lit = iceberggo.NewLiteral(x)
	case int64:
		lit = iceberggo.NewLiteral(x)
	case time.Time:
		lit = iceberggo.NewLiteral(iceberggo.Timestamp(x.UnixMicro()))
	}
	out := it.Apply(iceberggo.Optional[iceberggo.Literal]{Valid: true, Val: lit})
	switch o := out.Val.Any().(type) {
	case int32:
		return float64(o)
	case iceberggo.Date:
		return o.ToTime().Format(time.DateOnly)
	default:
		return o
	}
}

// checkValuePartitioned checks table kafka.t in dir: its spec, and each
// record of each file against the file's manifest partition values and
// folders.
func checkValuePartitioned(t *testing.T, duck *outside.DuckDB, dir string, by []string, n int) {
	spec, entries := readTable(t, dir)
	if len(spec) != len(by) {
		t.Fatalf("the table's spec is %v for %v", spec, by)
	}
	var stmts []string
	for _, e := range entries {
		stmts = append(stmts, fmt.Sprintf(`SELECT "offset", value.id AS id FROM read_parquet(%s)`, outside.SQLString(e.path)))
	}
	results := duck.Query(t, stmts...)
	seen := map[int64]int{}
	values := map[string]bool{}
	tmpl, err := naming.Parse("x=" + strings.Join(func() []string {
		var out []string
		for _, b := range by {
			vt, _ := partvalue.ParseValueTransform(b)
			out = append(out, vt.FieldName()+"={{value_field:path="+vt.Path+transformParam(vt)+"}}")
		}
		return out
	}(), "/") + "/{{topic}}-{{partition}}-{{start_offset}}")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		rows := results[i]
		if float64(len(rows)) != e.records {
			t.Errorf("%s: the manifest says %v records, DuckDB reads %d", e.path, e.records, len(rows))
		}
		values[fmt.Sprint(e.partition)] = true
		folders := map[string]string{}
		for _, seg := range strings.Split(path.Dir(e.path), "/") {
			if k, v, ok := strings.Cut(seg, "="); ok {
				folders[k] = v
			}
		}
		for _, r := range rows {
			id := toInt64(r["id"])
			seen[id]++
			p, o := int32(id/1000), id%1000
			_, country, user, created := orderOf(t, p, o)
			for j, b := range by {
				vt, _ := partvalue.ParseValueTransform(b)
				name, tr, _ := strings.Cut(spec[j], ":")
				var src any
				switch vt.Path {
				case "country":
					src = country
				case "user.id":
					src = user
				case "created":
					src = created
				}
				want := icebergValue(t, tr, src)
				if got := e.partition[name]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s holds record %d/%d whose %s is %v, but its manifest entry says %v", e.path, p, o, name, want, got)
				}
				text, err := tmpl.FieldText(vt.Path, src)
				if err != nil {
					t.Fatal(err)
				}
				if folders[name] != text {
					t.Errorf("%s holds record %d/%d whose %s renders %s, but it is in folder %s=%s", e.path, p, o, name, text, name, folders[name])
				}
				if unesc, _ := url.QueryUnescape(folders[name]); want != nil && fmt.Sprint(want) != unesc && (tr == "identity" || strings.HasPrefix(tr, "truncate")) {
					t.Errorf("folder %s=%s does not decode to the manifest's %v", name, folders[name], want)
				}
			}
		}
	}
	if len(seen) != n {
		t.Errorf("the files hold %d distinct records; want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("record %d is in the table %d times", id, c)
		}
	}
	if len(values) < 4 {
		t.Errorf("%d distinct partition values: the test must split the records", len(values))
	}
	t.Logf("%d files, %d partition values", len(entries), len(values))
}

func transformParam(vt partvalue.ValueTransform) string {
	switch vt.Transform {
	case "identity":
		return ""
	case "bucket", "truncate":
		return fmt.Sprintf(",%s=%d", vt.Transform, vt.N)
	}
	return "," + vt.Transform
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case int64:
		return x
	case string:
		var n int64
		_, _ = fmt.Sscan(x, &n)
		return n
	}
	panic(fmt.Sprintf("an id of type %T", v))
}
