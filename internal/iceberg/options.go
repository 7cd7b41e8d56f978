package iceberg

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/iceberg/maintain"
	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
)

// Options is the config's iceberg section: where Spillway commits the data
// files it writes. Table "" means no table: plain files only. The koanf tags
// are the public key names (docs/config.md lists them): add keys, never
// rename them.
type Options struct {
	// Table is "namespace.table"; {{topic}} in it is replaced by each
	// record's topic, with its dots as "_" (see Name). The namespace may
	// have several levels ("a.b.table"): the last dot separates the table
	// name.
	Table   string         `koanf:"table"`
	Catalog CatalogOptions `koanf:"catalog"`
	// PartitionBy is the table's partition spec, as Iceberg transforms:
	// "partition", "day(timestamp)", "hour(timestamp)", "bucket(16, key)";
	// see docs/iceberg.md. Used only when Spillway creates the table.
	PartitionBy []string `koanf:"partition_by"`
	// CommitInterval is the longest time between snapshots while data
	// flows.
	CommitInterval time.Duration `koanf:"commit_interval"`
	// AutoCreate creates the namespace and the table from the first
	// file's schema when they do not exist.
	AutoCreate bool `koanf:"auto_create"`
	// EvolveSchema adds the optional columns a file brings to the table's
	// schema before adding the file.
	EvolveSchema bool `koanf:"evolve_schema"`
	// ExpireSnapshots expires old snapshots after each commit (package maintain).
	ExpireSnapshots ExpireOptions `koanf:"expire_snapshots"`
}

// CatalogOptions says which catalog holds the table.
type CatalogOptions struct {
	// Type is sql (embedded SQLite), rest or glue (not yet supported).
	Type string `koanf:"type"`
	// URI is, for sql, the SQLite file's path ("" = catalog.db in a local
	// warehouse); for rest, the catalog's http(s) URL.
	URI string `koanf:"uri"`
	// Warehouse is where new tables go: "" = storage.url + storage.prefix.
	// For rest it is also the warehouse name sent to the catalog.
	Warehouse string `koanf:"warehouse"`
	// Credential is a REST catalog's OAuth2 client credential,
	// "client_id:client_secret", or the secret alone (secret).
	Credential string `koanf:"credential"`
	// Token is a REST catalog's bearer token (secret).
	Token string `koanf:"token"`
	TLS   TLS    `koanf:"tls"`
	// Properties are passed to the catalog and its FileIO as they are,
	// each "name=value" (iceberg-go's names, such as
	// s3.endpoint=http://127.0.0.1:9000 or rest.sigv4-enabled=true): a
	// list, since the names hold dots, which config keys can't. Values of
	// names that say secret are redacted wherever shown.
	Properties []string `koanf:"properties"`
}

// TLS is the REST catalog's TLS: a CA to trust instead of the system's,
// and a client certificate for mutual TLS.
type TLS struct {
	CAFile   string `koanf:"ca_file"`
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// Catalog types.
const (
	TypeSQL  = "sql"
	TypeREST = "rest"
	TypeGlue = "glue"
)

var catalogTypes = []string{TypeSQL, TypeREST, TypeGlue}

// Defaults are the section's defaults, for config's key table.
func Defaults() Options {
	return Options{
		Catalog:        CatalogOptions{Type: TypeSQL},
		CommitInterval: time.Minute,
		AutoCreate:     true,
		EvolveSchema:   true,

		ExpireSnapshots: maintain.DefaultExpire(),
	}
}

// Enabled reports whether records go to a table.
func (o Options) Enabled() bool { return o.Table != "" }

// Normalize puts the catalog type in its canonical case; a value that names
// no type is left as given, for Validate to quote.
func (o *Options) Normalize() {
	o.Catalog.Type = keycheck.Canon(o.Catalog.Type, catalogTypes)
}

// topicVar is the one template variable of iceberg.table.
const topicVar = "{{topic}}"

// identPart is what a namespace level or table name may be once {{topic}}
// is replaced: Kafka topic characters, which every catalog accepts.
var identPart = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate reports every problem with the section as a *keycheck.Error, or
// nil: each names its iceberg key, the value when it is not secret, and the
// fix. Without a table nothing is checked but that no other key asks for
// one.
func (o *Options) Validate() error {
	var ps keycheck.List
	c := o.Catalog
	if o.Table == "" {
		if c.URI != "" {
			ps.Add("iceberg.catalog.uri", redactURI(c.URI), "is set but iceberg.table is empty; set iceberg.table, such as kafka.{{topic}}, or remove the iceberg section")
		}
		if len(o.PartitionBy) > 0 {
			ps.Add("iceberg.partition_by", strings.Join(o.PartitionBy, ","), "is set but iceberg.table is empty; set iceberg.table, such as kafka.{{topic}}")
		}
		return ps.Err()
	}
	if v := strings.Index(o.Table, "{{"); v >= 0 && v < strings.LastIndex(o.Table, ".") {
		ps.Add("iceberg.table", o.Table, "uses a variable in the namespace; only the table part, after the last '.', may use {{topic}}, such as kafka.{{topic}}")
	} else if _, _, err := SplitName(strings.ReplaceAll(o.Table, topicVar, "topic")); err != nil {
		ps.Add("iceberg.table", o.Table, "%v; use namespace.table, such as kafka.events or kafka.{{topic}}", err)
	} else if strings.Contains(strings.ReplaceAll(o.Table, topicVar, ""), "{{") {
		ps.Add("iceberg.table", o.Table, "uses a template variable other than {{topic}}; use only {{topic}}")
	}
	ps.OneOf("iceberg.catalog.type", c.Type, catalogTypes)
	switch c.Type {
	case TypeGlue:
		ps.Add("iceberg.catalog.type", c.Type, "is not supported yet; use rest (AWS Glue serves the Iceberg REST protocol at https://glue.<region>.amazonaws.com/iceberg with rest.sigv4-enabled) or sql")
	case TypeSQL:
		if strings.Contains(c.URI, "://") && !strings.HasPrefix(c.URI, "file:") {
			ps.Add("iceberg.catalog.uri", redactURI(c.URI), "is not a SQLite file; the sql catalog takes a local file path, such as /var/lib/spillway/catalog.db")
		}
		for _, k := range []struct{ key, v string }{
			{"iceberg.catalog.credential", c.Credential},
			{"iceberg.catalog.token", c.Token},
		} {
			if k.v != "" {
				ps.Add(k.key, "", "is set but iceberg.catalog.type is sql; it is for a rest catalog")
			}
		}
	case TypeREST:
		u, err := url.Parse(c.URI)
		switch {
		case c.URI == "":
			ps.Add("iceberg.catalog.uri", "", "is required with iceberg.catalog.type rest; give the catalog's URL, such as https://catalog.example.com/api/catalog")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			ps.Add("iceberg.catalog.uri", redactURI(c.URI), "is not an http(s) URL; give the catalog's URL, such as https://catalog.example.com/api/catalog")
		case u.User != nil:
			ps.Add("iceberg.catalog.uri", "", "must not carry credentials; set iceberg.catalog.credential or iceberg.catalog.token instead")
		}
		if c.Credential != "" && c.Token != "" {
			ps.Add("iceberg.catalog.token", "", "is set with iceberg.catalog.credential; set one of them")
		}
	}
	if c.Warehouse != "" && !restWarehouseName(c) {
		if _, err := warehouseLocation(c.Warehouse); err != nil {
			ps.Add("iceberg.catalog.warehouse", redactURI(c.Warehouse), "%v", err)
		}
	}
	for i, p := range c.Properties {
		if name, _, ok := strings.Cut(p, "="); !ok || strings.TrimSpace(name) == "" {
			shown := p
			if secretProp(name) {
				shown = ""
			}
			ps.Add(fmt.Sprintf("iceberg.catalog.properties[%d]", i), shown, "must be name=value, such as s3.endpoint=http://127.0.0.1:9000")
		}
	}
	t := c.TLS
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.Add("iceberg.catalog.tls.key_file", "", "required when iceberg.catalog.tls.cert_file is set: a client certificate needs its private key")
	case t.KeyFile != "" && t.CertFile == "":
		ps.Add("iceberg.catalog.tls.cert_file", "", "required when iceberg.catalog.tls.key_file is set: a private key needs its client certificate")
	}
	for _, fl := range []struct{ key, path string }{
		{"iceberg.catalog.tls.ca_file", t.CAFile},
		{"iceberg.catalog.tls.cert_file", t.CertFile},
		{"iceberg.catalog.tls.key_file", t.KeyFile},
	} {
		if fl.path == "" {
			continue
		}
		if c.Type != TypeREST {
			ps.Add(fl.key, fl.path, "is set but iceberg.catalog.type is not rest; TLS is for a rest catalog")
		}
		switch fi, err := os.Stat(fl.path); {
		case errors.Is(err, fs.ErrNotExist):
			ps.Add(fl.key, fl.path, "does not exist; give the path of a PEM file")
		case err != nil:
			ps.Add(fl.key, fl.path, "can't be read: %v", errors.Unwrap(err))
		case fi.IsDir():
			ps.Add(fl.key, fl.path, "is a directory; give the path of a PEM file")
		}
	}
	for i, p := range o.PartitionBy {
		if _, err := parseTransform(p); err != nil {
			ps.Add(fmt.Sprintf("iceberg.partition_by[%d]", i), p, "%v", err)
		}
	}
	if o.CommitInterval <= 0 {
		ps.Add("iceberg.commit_interval", o.CommitInterval.String(), "must be positive; use a duration such as 1m")
	}
	o.ExpireSnapshots.Validate(&ps)
	return ps.Err()
}

// props are Properties as a map; items without "=" (which Validate
// refuses) are left out.
func (c CatalogOptions) props() map[string]string {
	out := map[string]string{}
	for _, p := range c.Properties {
		if k, v, ok := strings.Cut(p, "="); ok {
			out[strings.TrimSpace(k)] = v
		}
	}
	return out
}

// CheckWarehouse reports, as a *keycheck.Error, what Open would refuse about
// the warehouse and the sql catalog's file once the default warehouse
// (storage.url + storage.prefix) is known, so that `config check` says it.
func (o Options) CheckWarehouse(defaultWarehouse string) error {
	if !o.Enabled() {
		return nil
	}
	_, err := o.resolve(defaultWarehouse)
	return err
}

// SplitName splits a resolved table name into its namespace levels and
// table name at the dots.
func SplitName(name string) (ns []string, table string, err error) {
	parts := strings.Split(name, ".")
	if len(parts) < 2 {
		return nil, "", errors.New("has no namespace")
	}
	for _, p := range parts {
		if !identPart.MatchString(p) {
			return nil, "", fmt.Errorf("has an empty or invalid part %q (letters, digits, _ and - only)", p)
		}
	}
	return parts[:len(parts)-1], parts[len(parts)-1], nil
}

// Name resolves iceberg.table for a topic. A dot in the topic becomes
// "_": dots separate the namespace levels, and "kafka.{{topic}}" must
// name one table for orders.v1 (kafka.orders_v1), not table v1 in
// namespace kafka.orders.
func (o Options) Name(topic string) string {
	return strings.ReplaceAll(o.Table, topicVar, naming.TableTopic(topic))
}

// transform is one parsed partition_by entry.
type transform struct {
	kind   string // identity, day, hour, month, year, bucket, truncate
	column string // the record's partition, timestamp or key; a value field's path
	n      int
	// value: column is a field of the registry-typed value (naming's
	// {{value_field}} splits files by it), not the record's own.
	value bool
	name  string // the partition field's name, for a value field
}

var transformRE = regexp.MustCompile(`^\s*(?:(identity|year|month|day|hour|bucket|truncate)\s*\(\s*(?:(\d+)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)|([A-Za-z_][A-Za-z0-9_]*))\s*$`)

// parseTransform reads "partition", "day(timestamp)", "bucket(N, key)", or
// a transform of a field of the registry-typed value ("country",
// "identity(country)", "bucket(16, user_id)", "truncate(4, name)",
// "day(created_at)", a nested field by its dotted path): the transforms
// whose value Spillway knows for each file it writes, since it splits a
// partition's records into files by them (its Kafka partition, its
// records' hour or day, its key's bucket, its value's field; see naming's
// key_bucket and value_field).
func parseTransform(s string) (transform, error) {
	canon := partvalue.CanonTransform(s)
	if canon != partitionColumn && !strings.HasSuffix(canon, "(timestamp)") && !strings.HasSuffix(canon, ",key)") && canon != "identity(partition)" {
		if vt, ok := partvalue.ParseValueTransform(canon); ok {
			return transform{kind: vt.Transform, column: vt.Path, n: vt.N, value: true, name: vt.FieldName()}, nil
		}
	}
	m := transformRE.FindStringSubmatch(s)
	if m == nil {
		return transform{}, errors.New(`is not a transform; use partition, day(timestamp), hour(timestamp), month(timestamp), year(timestamp), bucket(N, key), or of a value field: country, identity(country), bucket(16, user_id), truncate(4, name), day(created_at)`)
	}
	if m[4] != "" {
		return transform{kind: "identity", column: m[4]}, nil
	}
	t := transform{kind: m[1], column: m[3]}
	if m[2] != "" {
		n, err := strconv.Atoi(m[2])
		if err != nil || n <= 0 {
			return transform{}, fmt.Errorf("has a bad width %q; use a positive number", m[2])
		}
		t.n = n
	}
	switch t.kind {
	case "truncate":
		return transform{}, fmt.Errorf("truncates %s, which is the record's own; truncate a field of the value, such as truncate(4, name)", t.column)
	case "bucket":
		if t.n == 0 {
			return transform{}, fmt.Errorf("bucket needs the number of buckets; write bucket(16, %s)", t.column)
		}
		if t.column != "key" {
			return transform{}, fmt.Errorf("buckets %s, the record's own; use bucket(%d, key) or a field of the value", t.column, t.n)
		}
		return t, nil
	case "identity":
		if t.column != partitionColumn {
			return transform{}, fmt.Errorf("partitions by %s, which is not a value field Spillway can lay out; use partition", t.column)
		}
	default:
		if t.column != "timestamp" {
			return transform{}, fmt.Errorf("applies %s to %s, the record's own; use %s(timestamp) or a date or timestamp field of the value", t.kind, t.column, t.kind)
		}
	}
	if t.n != 0 {
		return transform{}, fmt.Errorf("%s takes no width; write %s(%s)", t.kind, t.kind, t.column)
	}
	return t, nil
}
