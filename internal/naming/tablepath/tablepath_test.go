package tablepath

import (
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/naming"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLocationUnder: a table location is taken relative to storage.url
// and storage.prefix only when files written there land inside it.
func TestLocationUnder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, prefix, loc string
		rel              string // "" = refused
	}{
		{"s3://b?region=eu-west-1", "", "s3://b/kafka.db/t", "kafka.db/t"},
		{"s3://b?region=eu-west-1", "raw/", "s3://b/raw/kafka.db/t", "kafka.db/t"},
		{"s3://b", "raw/", "s3://b/rawer/kafka.db/t", ""},
		{"s3://b", "raw/", "s3://other/raw/kafka.db/t", ""},
		{"s3://b", "raw/", "gs://b/raw/kafka.db/t", ""},
		{"s3://b", "raw/", "s3://b/raw/../x.db/t", ""},
		{"s3://b", "raw/", "s3://b/raw/", ""},
		{"file:///var/out", "a/b/", "file:///var/out/a/b/wh/ns.db/t", "wh/ns.db/t"},
		{"file:///var/out", "", "file:///var/outside/ns.db/t", ""},
	}
	for _, tt := range tests {
		rel, err := LocationUnder(tt.url, tt.prefix, tt.loc)
		if tt.rel == "" {
			if err == nil {
				t.Errorf("%s + %q: %s accepted as %q, want refused", tt.url, tt.prefix, tt.loc, rel)
			}
			continue
		}
		if err != nil || rel != tt.rel {
			t.Errorf("%s + %q: %s gives %q, %v; want %q", tt.url, tt.prefix, tt.loc, rel, err, tt.rel)
		}
	}
}

// TestTemplate: the layout is applied once, whatever the number of
// loads, and every transform's template parses.
func TestTemplate(t *testing.T) {
	t.Parallel()
	var all []string
	for _, tr := range Transforms() {
		all = append(all, strings.Replace(tr, "N", "4", 1))
	}
	pp, err := PartitionPath(all)
	if err != nil {
		t.Fatal(err)
	}
	once := Template("ns.db/t", pp, "{{topic}}-{{partition}}-{{start_offset}}")
	if twice := Template("ns.db/t", pp, once); twice != once {
		t.Errorf("applied twice: %s, want %s", twice, once)
	}
	if _, err := naming.Parse(once); err != nil {
		t.Errorf("%s: %v", once, err)
	}
	if _, err := PartitionPath([]string{"partition", "partition"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a transform twice gave %v", err)
	}
}

// TestTemplateTableFolder: a {{topic}} in the table's folder
// renders as the table name does (dots as "_"), the file name keeps the
// topic, and Match and MatchPartition read such a name back to its topic.
func TestTemplateTableFolder(t *testing.T) {
	t.Parallel()
	tmpl, err := naming.Parse(Template("kafka.db/{{topic}}", "", "{{topic}}-{{partition}}-{{start_offset}}"))
	if err != nil {
		t.Fatal(err)
	}
	name := tmpl.Render(naming.Vars{Topic: "orders.v1", Partition: 1, StartOffset: 250})
	if want := "kafka.db/orders_v1/data/orders.v1-1-250"; name != want {
		t.Fatalf("Render = %q, want %q", name, want)
	}
	if v, ok := tmpl.Match(name); !ok || v.Topic != "orders.v1" || v.Partition != 1 || v.StartOffset != 250 {
		t.Errorf("Match(%q) = %+v, %v", name, v, ok)
	}
	if off, ok := tmpl.MatchPartition(name, "orders.v1", 1); !ok || off != 250 {
		t.Errorf("MatchPartition = %d, %v", off, ok)
	}
	for _, bad := range []string{"kafka.db/orders.v1/data/orders.v1-1-250", "kafka.db/orders_v1/data/orders-v1-1-250"} {
		if v, ok := tmpl.Match(bad); ok {
			t.Errorf("Match(%q) = %+v: a folder that is not the topic's table", bad, v)
		}
	}
	// {{topic:dots=_}} alone does not tell a.b and a_b apart.
	if _, err := naming.Parse("{{topic:dots=_}}-{{partition}}-{{start_offset}}"); err == nil {
		t.Error("a template with only {{topic:dots=_}} parsed")
	}
}

// TestPartitionPathBucket: bucket(N,key) is laid out as Iceberg
// names its field, key_bucket, and one table takes one key bucket.
func TestPartitionPathBucket(t *testing.T) {
	t.Parallel()
	pp, err := PartitionPath([]string{"day(timestamp)", "bucket(8,key)"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "timestamp_day={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/key_bucket={{key_bucket:n=8}}"; pp != want {
		t.Errorf("got %s, want %s", pp, want)
	}
	for _, by := range [][]string{{"bucket(8,key)", "bucket(4,key)"}, {"bucket(0,key)"}, {"bucket(4,)"}} {
		if _, err := PartitionPath(by); err == nil {
			t.Errorf("%v laid out", by)
		}
	}
}
