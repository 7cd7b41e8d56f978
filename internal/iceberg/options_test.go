package iceberg

import (
	"errors"
	"testing"

	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/keycheck/keychecktest"
)

const secret = "s3cr3t-value"

func TestValidate(t *testing.T) {
	t.Parallel()
	with := func(f func(*Options)) Options {
		o := Defaults()
		o.Table = "kafka.{{topic}}"
		f(&o)
		return o
	}
	tests := []struct {
		name string
		o    Options
		want []string
	}{
		{"off", Defaults(), nil},
		{"default sql", with(func(*Options) {}), nil},
		{"partition_by without a table", func() Options { o := Defaults(); o.PartitionBy = []string{"partition"}; return o }(),
			[]string{`iceberg.partition_by: "partition" is set but iceberg.table is empty; set iceberg.table, such as kafka.{{topic}}`}},
		{"no namespace", with(func(o *Options) { o.Table = "{{topic}}" }),
			[]string{`iceberg.table: "{{topic}}" has no namespace; use namespace.table, such as kafka.events or kafka.{{topic}}`}},
		{"other variable", with(func(o *Options) { o.Table = "kafka.{{partition}}" }),
			[]string{`iceberg.table: "kafka.{{partition}}" has an empty or invalid part "{{partition}}" (letters, digits, _ and - only); use namespace.table, such as kafka.events or kafka.{{topic}}`}},
		{"glue", with(func(o *Options) {
			o.Catalog.Type, o.Catalog.Region, o.Catalog.CatalogID = "GLUE", "eu-west-1", "123456789012"
		}), nil},
		{"glue with a bad region, id and endpoint", with(func(o *Options) {
			o.Catalog.Type, o.Catalog.Region, o.Catalog.CatalogID, o.Catalog.URI = "glue", "EU_WEST", "acct", "glue.example.com"
		}), []string{
			`iceberg.catalog.region: "EU_WEST" is not an AWS region; give one such as us-east-1 or eu-west-1`,
			`iceberg.catalog.catalog_id: "acct" is not a Glue catalog id; give the 12-digit AWS account id that owns the catalog, such as 123456789012, or leave it empty for the credentials' own account`,
			`iceberg.catalog.uri: "glue.example.com" is not an http(s) URL; for glue it replaces the region's endpoint, such as https://vpce-0123-abcd.glue.us-east-1.vpce.amazonaws.com, or leave it empty`,
		}},
		{"glue with a nested namespace", with(func(o *Options) { o.Catalog.Type, o.Table = "glue", "lake.kafka.{{topic}}" }),
			[]string{`iceberg.table: "lake.kafka.{{topic}}" has a namespace of 2 levels, and a Glue catalog's namespace is one database; use database.table, such as kafka.{{topic}}`}},
		{"glue with a token", with(func(o *Options) { o.Catalog.Type, o.Catalog.Token = "glue", secret }),
			[]string{`iceberg.catalog.token: is set but iceberg.catalog.type is glue; it is for a rest catalog; Glue takes the AWS credentials of the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance's role)`}},
		{"glue with a warehouse name", with(func(o *Options) { o.Catalog.Type, o.Catalog.Warehouse = "glue", "analytics" }),
			[]string{`iceberg.catalog.warehouse: "analytics" is not a location; a glue catalog's warehouse is where its tables go, such as s3://bucket/warehouse, or leave it empty for storage.url + storage.prefix`}},
		{"region on sql", with(func(o *Options) { o.Catalog.Region = "us-east-1" }),
			[]string{`iceberg.catalog.region: "us-east-1" is set but iceberg.catalog.type is sql; it is for a glue catalog`}},
		{"unknown type", with(func(o *Options) { o.Catalog.Type = "hive" }),
			[]string{`iceberg.catalog.type: "hive" is not valid; use sql, rest or glue`}},
		{"rest without uri", with(func(o *Options) { o.Catalog.Type = "rest" }),
			[]string{`iceberg.catalog.uri: is required with iceberg.catalog.type rest; give the catalog's URL, such as https://catalog.example.com/api/catalog`}},
		{"rest uri with credentials", with(func(o *Options) { o.Catalog.Type = "rest"; o.Catalog.URI = "https://u:" + secret + "@h/c" }),
			[]string{`iceberg.catalog.uri: must not carry credentials; set iceberg.catalog.credential or iceberg.catalog.token instead`}},
		{"rest credential and token", with(func(o *Options) {
			o.Catalog.Type, o.Catalog.URI, o.Catalog.Credential, o.Catalog.Token = "rest", "https://h/c", "id:"+secret, secret
		}), []string{`iceberg.catalog.token: is set with iceberg.catalog.credential; set one of them`}},
		{"token on sql", with(func(o *Options) { o.Catalog.Token = secret }),
			[]string{`iceberg.catalog.token: is set but iceberg.catalog.type is sql; it is for a rest catalog`}},
		{"sql uri not a file", with(func(o *Options) { o.Catalog.URI = "postgres://u:" + secret + "@h/db" }),
			[]string{`iceberg.catalog.uri: "postgres://REDACTED@h/db" is not a SQLite file; the sql catalog takes a local file path, such as /var/lib/spillway/catalog.db`}},
		{"azure warehouse", with(func(o *Options) { o.Catalog.Warehouse = "azblob://c" }),
			[]string{`iceberg.catalog.warehouse: "azblob://c" is Spillway's storage scheme, not an Iceberg location; a table names an Azure container abfs://container@account.dfs.core.windows.net/prefix, or leave iceberg.catalog.warehouse empty for storage.url + storage.prefix`}},
		{"rest warehouse name", with(func(o *Options) {
			o.Catalog.Type, o.Catalog.URI, o.Catalog.Warehouse = "rest", "https://h/c", "analytics"
		}), nil},
		{"bucket", with(func(o *Options) { o.PartitionBy = []string{"partition", "day(timestamp)", "bucket(16, key)"} }), nil},
		{"bucket without a count", with(func(o *Options) { o.PartitionBy = []string{"bucket(key)"} }),
			[]string{`iceberg.partition_by[0]: "bucket(key)" bucket needs the number of buckets; write bucket(16, key)`}},
		{"bucket without N", with(func(o *Options) { o.PartitionBy = []string{"bucket(key)"} }),
			[]string{`iceberg.partition_by[0]: "bucket(key)" bucket needs the number of buckets; write bucket(16, key)`}},
		{"day of the key", with(func(o *Options) { o.PartitionBy = []string{"day(key)"} }),
			[]string{`iceberg.partition_by[0]: "day(key)" applies day to key, the record's own; use day(timestamp) or a date or timestamp field of the value`}},
		{"truncate", with(func(o *Options) { o.PartitionBy = []string{"truncate(4, key)"} }),
			[]string{`iceberg.partition_by[0]: "truncate(4, key)" truncates key, which is the record's own; truncate a field of the value, such as truncate(4, name)`}},
		{"not a transform", with(func(o *Options) { o.PartitionBy = []string{"days(timestamp"} }),
			[]string{`iceberg.partition_by[0]: "days(timestamp" is not a transform; use partition, day(timestamp), hour(timestamp), month(timestamp), year(timestamp), bucket(N, key), or of a value field: country, identity(country), bucket(16, user_id), truncate(4, name), day(created_at)`}},
		{"commit interval", with(func(o *Options) { o.CommitInterval = 0 }),
			[]string{`iceberg.commit_interval: "0s" must be positive; use a duration such as 1m`}},
		{"tls on sql", with(func(o *Options) { o.Catalog.TLS.CAFile = "/nonexistent/ca.pem" }),
			[]string{`iceberg.catalog.tls.ca_file: "/nonexistent/ca.pem" is set but iceberg.catalog.type is not rest; TLS is for a rest catalog`, `iceberg.catalog.tls.ca_file: "/nonexistent/ca.pem" does not exist; give the path of a PEM file`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := tt.o
			o.Normalize()
			keychecktest.Problems(t, o.Validate(), tt.want, secret, "secret")
		})
	}
}

// A remote warehouse has no place for the SQLite file: Open and
// CheckWarehouse name iceberg.catalog.uri.
func TestRemoteWarehouseNeedsSQLiteURI(t *testing.T) {
	t.Parallel()
	o := Defaults()
	o.Table = "kafka.events"
	err := o.CheckWarehouse("s3://bucket/prefix?endpoint=http://127.0.0.1:1&region=us-east-1")
	var ke *keycheck.Error
	if !errors.As(err, &ke) || ke.Problems[0].Key != "iceberg.catalog.uri" {
		t.Fatalf("CheckWarehouse = %v, want a problem with iceberg.catalog.uri", err)
	}
	if _, err := Open(testCtx(t), o, "s3://bucket/prefix"); !errors.As(err, &ke) {
		t.Fatalf("Open = %v, want a *keycheck.Error", err)
	}
}

// {{topic}} names one table per topic, whatever dots the topic has.
func TestName(t *testing.T) {
	t.Parallel()
	o := Options{Table: "kafka.{{topic}}"}
	for topic, want := range map[string]string{"events": "kafka.events", "orders.v1": "kafka.orders_v1", "a-b_c": "kafka.a-b_c"} {
		got := o.Name(topic)
		if got != want {
			t.Errorf("Name(%q) = %q, want %q", topic, got, want)
		}
		if ns, tbl, err := SplitName(got); err != nil || len(ns) != 1 {
			t.Errorf("SplitName(%q) = %v, %q, %v", got, ns, tbl, err)
		}
	}
}
