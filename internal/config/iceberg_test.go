package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/tablepath"
)

// TestIcebergRejects: each bad iceberg value, or a section the table
// can't work with, stops with the key, the value and the fix, and
// nothing else.
func TestIcebergRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		env        []string
		lines      []string
	}{
		{"table without a namespace", "format: {type: parquet}\niceberg: {table: events}\n", nil,
			[]string{`iceberg.table: "events" has no namespace; use namespace.table, such as kafka.events or kafka.{{topic}}`}},
		{"topic in the namespace", "format: {type: parquet}\niceberg: {table: \"{{topic}}.events\"}\n", nil,
			[]string{`iceberg.table: "{{topic}}.events" uses a variable in the namespace; only the table part, after the last '.', may use {{topic}}, such as kafka.{{topic}}`}},
		{"unknown variable", "format: {type: parquet}\niceberg: {table: \"kafka.{{partition}}\"}\n", nil,
			[]string{`iceberg.table: "kafka.{{partition}}" has an empty or invalid part "{{partition}}" (letters, digits, _ and - only); use namespace.table, such as kafka.events or kafka.{{topic}}`}},
		{"catalog type", "format: {type: parquet}\niceberg: {table: kafka.events, catalog: {type: hive}}\n", nil,
			[]string{`iceberg.catalog.type: "hive" is not valid; use sql, rest or glue`}},
		{"rest without a URL", "format: {type: parquet}\niceberg: {table: kafka.events, catalog: {type: rest}}\n", nil,
			[]string{`iceberg.catalog.uri: is required with iceberg.catalog.type rest; give the catalog's URL, such as https://catalog.example.com/api/catalog`}},
		{"a token for the SQL catalog, never shown", "format: {type: parquet}\niceberg: {table: kafka.events, catalog: {token: s3cr3t}}\n", nil,
			[]string{`iceberg.catalog.token: is set but iceberg.catalog.type is sql; it is for a rest catalog`}},
		{"a REST URL with a password", "format: {type: parquet}\niceberg: {table: kafka.events, catalog: {type: rest, uri: \"https://u:s3cr3t@catalog:8181\"}}\n", nil,
			[]string{`iceberg.catalog.uri: must not carry credentials; set iceberg.catalog.credential or iceberg.catalog.token instead`}},
		{"truncate of the key", "format: {type: parquet}\niceberg: {table: kafka.events, partition_by: [\"truncate(16, key)\"]}\n", nil,
			[]string{`iceberg.partition_by[0]: "truncate(16,key)" truncates key, which is the record's own; truncate a field of the value, such as truncate(4, name)`}},
		{"a value field without the registry", "format: {type: parquet}\niceberg: {table: kafka.events, partition_by: [\"day(created_at)\"]}\n", nil,
			[]string{`iceberg.partition_by: "day(created_at)" partitions by the value field created_at, which Spillway reads only from values the schema registry types; set schema_registry.url and schema_registry.decode: value (or both), or drop the value field`}},
		{"a value field without the value column", "format: {type: parquet, fields: [key, offset]}\nschema_registry: {url: \"http://sr:8081\"}\niceberg: {table: kafka.events, partition_by: [\"bucket(16, user_id)\"]}\n", nil,
			[]string{`iceberg.partition_by: "bucket(16,user_id)" partitions by the value field user_id, but format.fields has no value, so the files hold no column of it; add value to format.fields, or drop the value field`}},
		{"bucket without the key column", "format: {type: parquet, fields: [value, offset]}\niceberg: {table: kafka.events, partition_by: [\"bucket(16, key)\"]}\n", nil,
			[]string{`iceberg.partition_by: "bucket(16,key)" buckets the key, which the files hold only with format.envelope: true and key in format.fields; add it, or drop the bucket`}},
		{"bucket of a registry-typed key", "format: {type: parquet}\nschema_registry: {url: \"http://127.0.0.1:1\", decode: both}\niceberg: {table: kafka.events, partition_by: [\"bucket(16, key)\"]}\n", nil,
			[]string{`iceberg.partition_by: "bucket(16,key)" buckets the key, but schema_registry.decode both types the key column by its registry schema, and Iceberg's bucket of a typed column is not the bucket of the key's bytes that Spillway splits files by; set schema_registry.decode: value, or drop the bucket`}},
		{"two buckets", "format: {type: parquet}\niceberg: {table: kafka.events, partition_by: [\"bucket(16, key)\", \"bucket(4, key)\"]}\n", nil,
			[]string{`iceberg.partition_by: "bucket(16,key), bucket(4,key)" transform "bucket(4,key)" is listed twice (Iceberg's partition field key_bucket)`}},
		{"partition_by without a table", "iceberg: {partition_by: [partition]}\n", nil,
			[]string{`iceberg.partition_by: "partition" is set but iceberg.table is empty; set iceberg.table, such as kafka.{{topic}}`}},
		{"day partitions on the wall clock, in Berlin", "format: {type: parquet}\nfile: {timezone: Europe/Berlin}\niceberg: {table: kafka.events, partition_by: [\"day(timestamp)\"]}\n", nil, []string{
			`file.timestamp_source: "wallclock" must be event when iceberg.partition_by uses the timestamp: each file must hold the records of one day or hour by their own timestamps; set file.timestamp_source: event`,
			`file.timezone: "Europe/Berlin" must be UTC when iceberg.partition_by uses the timestamp: Iceberg's day and hour are UTC's; set file.timezone: UTC`,
		}},
		{"day partitions without a timestamp column", "format: {type: parquet, fields: [key, value]}\nfile: {timestamp_source: event}\niceberg: {table: kafka.events, partition_by: [\"day(timestamp)\"]}\n", nil,
			[]string{`iceberg.partition_by: "day(timestamp)" partitions by timestamp, which the files hold only with format.envelope: true and timestamp in format.fields; add it, or partition by partition`}},
		{"a prefix that is no folder", "format: {type: parquet}\nstorage: {prefix: raw-}\niceberg: {table: kafka.events}\n", nil,
			[]string{`storage.prefix: "raw-" must end with "/" (or be empty) when iceberg.table is set: the table's files go in folders under it; such as raw-/`}},
		{"a warehouse elsewhere", "format: {type: parquet}\nstorage: {prefix: raw/}\niceberg: {table: kafka.events, catalog: {warehouse: \"file:///tmp/spillway-out/tables\"}}\n", nil,
			[]string{`iceberg.catalog.warehouse: "file:///tmp/spillway-out/tables" puts the table outside where Spillway writes: the table location file:///tmp/spillway-out/tables/kafka.db/events is not inside storage.url and storage.prefix (file:///tmp/spillway-out/raw/), where Spillway writes its files; leave it empty (storage.url + storage.prefix) or set one under them, or change storage.prefix`}},
		{"a warehouse in another bucket", "format: {type: parquet}\niceberg: {table: kafka.events, catalog: {warehouse: \"s3://lake/wh\"}}\n", nil,
			[]string{`iceberg.catalog.warehouse: "s3://lake/wh" puts the table outside where Spillway writes: the table location s3://lake/wh/kafka.db/events is not in storage.url's file://; leave it empty (storage.url + storage.prefix) or set one under them, or change storage.prefix`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := tt.env
			if env == nil {
				env = baseEnv
			}
			e := loadErr(t, tt.yaml, env)
			got := strings.Split(e.Error(), "\n")
			if !reflect.DeepEqual(got, tt.lines) {
				t.Errorf("error lines:\n got %q\nwant %q", got, tt.lines)
			}
			if strings.Contains(e.Error(), "s3cr3t") {
				t.Errorf("the error shows a secret: %v", e)
			}
		})
	}
}

// TestIcebergLayout: with a table, file.name_template is the table's
// layout, <location>/data/<partition path>/ and the template, for each
// partition_by; the files' keys render there, one partition value per
// file; and the layout is what the table location says, under the prefix.
func TestIcebergLayout(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 13, 4, 5, 0, time.UTC)
	v := naming.Vars{Topic: "orders", Partition: 3, StartOffset: 42, Time: at}
	tests := []struct {
		partitionBy, prefix, warehouse, table string
		wantKey                               string
	}{
		{"[]", "", "", "kafka.events", "kafka.db/events/data/orders-3-42.parquet"},
		{"[\"day(timestamp)\"]", "", "", "kafka.events", "kafka.db/events/data/timestamp_day=2026-12-05/orders-3-42.parquet"},
		{"[\"hour(timestamp)\"]", "", "", "kafka.events", "kafka.db/events/data/timestamp_hour=2026-12-05-13/orders-3-42.parquet"},
		{"[\"month(timestamp)\"]", "", "", "kafka.events", "kafka.db/events/data/timestamp_month=2026-12/orders-3-42.parquet"},
		{"[\"year(timestamp)\"]", "", "", "kafka.events", "kafka.db/events/data/timestamp_year=2026/orders-3-42.parquet"},
		{"[partition]", "", "", "kafka.events", "kafka.db/events/data/partition=3/orders-3-42.parquet"},
		{"[\"bucket(4, key)\"]", "", "", "kafka.events", "kafka.db/events/data/key_bucket=null/orders-3-42.parquet"},
		{"[\"day(timestamp)\", \"bucket(16, key)\"]", "", "", "kafka.events", "kafka.db/events/data/timestamp_day=2026-12-05/key_bucket=null/orders-3-42.parquet"},
		{"[\"day(timestamp)\"]", "lake/", "", "kafka.{{topic}}", "lake/kafka.db/orders/data/timestamp_day=2026-12-05/orders-3-42.parquet"},
		{"[]", "lake/", "file:///tmp/spillway-out/lake/wh", "a.b.t", "lake/wh/a.b.db/t/data/orders-3-42.parquet"},
	}
	for _, tt := range tests {
		yaml := "format: {type: parquet}\nfile: {timestamp_source: event}\nstorage: {prefix: \"" + tt.prefix + "\"}\niceberg: {table: \"" + tt.table + "\", partition_by: " + tt.partitionBy + ", catalog: {warehouse: \"" + tt.warehouse + "\"}}\n"
		c, err := LoadBytes([]byte(yaml), baseEnv)
		if err != nil {
			t.Errorf("%s: %v", tt.partitionBy, err)
			continue
		}
		names, err := naming.NewConfiguredNames(c.Storage.Prefix, c.File.NameTemplate, c.File.Extension, c.Format.Type, c.Format.Compression)
		if err != nil {
			t.Fatal(err)
		}
		if got := names.Key(v); got != tt.wantKey {
			t.Errorf("%s, table %s: key %s, want %s (template %s)", tt.partitionBy, tt.table, got, tt.wantKey, c.File.NameTemplate)
		}
		// The next day is another file, in another folder.
		next := v
		next.Time = at.Add(24 * time.Hour)
		if strings.Contains(tt.partitionBy, "day") && names.Template.Group(next) == names.Template.Group(v) {
			t.Errorf("%s: records of two days share a file", tt.partitionBy)
		}
		// The layout sits in the table's location.
		ns, tbl, _ := SplitTable(strings.ReplaceAll(c.Iceberg.Table, "{{topic}}", v.Topic))
		loc := tablepath.Location(c.Warehouse(), ns, tbl)
		if want := strings.TrimSuffix(c.Storage.URL, "/") + "/" + tt.wantKey; !strings.HasPrefix(want, loc+"/data/") {
			t.Errorf("%s: the file %s is not under the table's %s/data/", tt.partitionBy, want, loc)
		}
	}
}

// TestIcebergYAMLRoundTrip: every iceberg key changed from its default
// renders (secrets redacted) and loads back the same, the layout applied
// once, as config check shows it.
func TestIcebergYAMLRoundTrip(t *testing.T) {
	t.Parallel()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := `
format: {type: parquet}
storage: {url: "s3://bucket?region=eu-west-1", prefix: raw/}
file: {timestamp_source: event}
iceberg:
  table: "lake.{{topic}}"
  catalog: {type: rest, uri: "https://catalog:8181", warehouse: "s3://bucket/raw/wh", credential: "id:s3cr3t", tls: {ca_file: "` + ca + `", cert_file: "` + ca + `", key_file: "` + ca + `"}, properties: [s3.path-style-access=true, s3.secret-access-key=s3cr3t]}
  partition_by: ["Day(timestamp)"]
  commit_interval: 30s
  auto_create: false
  evolve_schema: false
  expire_snapshots: {enabled: false, max_age: 24h, keep_last: 10}
`
	c, err := LoadBytes([]byte(yaml), []string{"SPILLWAY_KAFKA_TOPICS=events"})
	if err != nil {
		t.Fatal(err)
	}
	def, got := flatten(Default()), flatten(c)
	for _, s := range keys.leaves {
		if strings.HasPrefix(s.key, "iceberg.") && s.key != "iceberg.catalog.token" && !glueOnly[s.key] && reflect.DeepEqual(def[s.key], got[s.key]) {
			t.Errorf("%s keeps its default; change it so the round trip tests it", s.key)
		}
	}
	if want := "wh/lake.db/{{topic:dots=_}}/data/timestamp_day={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/{{topic}}-{{partition}}-{{start_offset}}"; c.File.NameTemplate != want {
		t.Errorf("file.name_template %s, want %s", c.File.NameTemplate, want)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cr3t") {
		t.Errorf("config check shows the credential:\n%s", out)
	}
	back, err := LoadBytes(out, nil)
	if err != nil {
		t.Fatalf("reloading:\n%s\n%v", out, err)
	}
	want := *c
	want.Iceberg.Catalog.Credential = "REDACTED"
	want.Iceberg.Catalog.Properties = []string{"s3.path-style-access=true", "s3.secret-access-key=REDACTED"}
	if !reflect.DeepEqual(back, &want) {
		t.Errorf("round trip:\n got %+v\nwant %+v\nYAML:\n%s", back, &want, out)
	}
}

// TestIcebergCatalogDSNRedacted: a database DSN, which the sql catalog
// does not take (it is a SQLite file), is refused without its password.
func TestIcebergCatalogDSNRedacted(t *testing.T) {
	t.Parallel()
	e := loadErr(t, "format: {type: parquet}\niceberg: {table: kafka.events, catalog: {uri: \"postgres://spill:s3cr3t@db:5432/catalog\"}}\n", baseEnv)
	if msg := e.Error(); strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, "iceberg.catalog.uri") {
		t.Errorf("config check refuses the catalog's DSN as:\n%s", msg)
	}
}

// glueOnly are keys a rest catalog (the round trip's) refuses; the glue
// tests of package iceberg and the agree test cover them.
var glueOnly = map[string]bool{"iceberg.catalog.region": true, "iceberg.catalog.catalog_id": true}
