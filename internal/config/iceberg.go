package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
	"github.com/spillway/spillway/internal/naming/tablepath"
)

// The iceberg section is package iceberg's Options (its keys, defaults
// and validation, which names the keys); what it asks of the other
// sections is checkIceberg's.

// icebergSecrets are redacted everywhere (keys.go's secretKeys).
var icebergSecrets = []string{"iceberg.catalog.credential", "iceberg.catalog.token"}

// normalizeIceberg puts enumerated values in canonical form.
func (c *Config) normalizeIceberg() {
	o := &c.Iceberg
	o.Table = strings.TrimSpace(o.Table)
	o.Normalize()
	for i, t := range o.PartitionBy {
		o.PartitionBy[i] = partvalue.CanonTransform(t)
	}
}

// SplitTable splits a table name at its last "." into namespace and table:
// "kafka.{{topic}}" is namespace "kafka" and table "{{topic}}". A topic
// (which may hold ".") is rendered into the table part only, after the
// split, so the namespace stays the one written.
func SplitTable(name string) (ns, table string, ok bool) {
	head := name
	if i := strings.Index(name, "{{"); i >= 0 {
		head = name[:i]
	}
	j := strings.LastIndex(head, ".")
	if j <= 0 || j == len(name)-1 {
		return "", "", false
	}
	return name[:j], name[j+1:], true
}

// SameTable returns the first two of topics that table (iceberg.table)
// names one table, and that table, or "" when each topic has its own:
// orders.v1 and orders_v1 are both kafka.orders_v1 under kafka.{{topic}}.
// A template without {{topic}} puts every topic in one table on purpose.
func SameTable(table string, topics []string) (a, b, name string) {
	if !strings.Contains(table, "{{topic}}") {
		return "", "", ""
	}
	seen := map[string]string{}
	for _, t := range topics {
		n := strings.ReplaceAll(table, "{{topic}}", naming.TableTopic(t))
		if o, ok := seen[n]; ok && o != t {
			return o, t, n
		}
		seen[n] = t
	}
	return "", "", ""
}

// Warehouse is iceberg.catalog.warehouse, or its default: storage.url
// with storage.prefix (its query, such as s3's region, left out).
func (c *Config) Warehouse() string {
	if w := c.Iceberg.Catalog.Warehouse; w != "" {
		return w
	}
	base, err := c.tableBase()
	if err != nil {
		return ""
	}
	return base + "/" + c.Storage.Prefix
}

// tableBase is storage.url as a table's locations name it
// (iceberg.TableBase): without its query, and an azblob:// container as
// abfs://container@account.dfs.core.windows.net.
func (c *Config) tableBase() (string, error) {
	if _, err := url.Parse(c.Storage.URL); err != nil {
		return "", fmt.Errorf("storage.url does not parse: %w", err)
	}
	return iceberg.TableBase(c.Storage.URL)
}

// IcebergWarehouse is the default warehouse package iceberg opens the
// catalog with: storage.url with storage.prefix appended to its path, its
// query (an s3 endpoint or region, which iceberg's FileIO takes) kept; an
// azblob:// container as its abfs:// location (tableBase; the endpoint
// and credentials reach the FileIO from the environment), or "" when no
// account is known to name it, which checkIceberg reports.
func (c *Config) IcebergWarehouse() string {
	u, err := url.Parse(c.Storage.URL)
	if err == nil && u.Scheme == "azblob" {
		base, err := c.tableBase()
		if err != nil {
			return ""
		}
		return base + "/" + c.Storage.Prefix
	}
	if err != nil || (u.Scheme == "" && u.Host == "") {
		return strings.TrimSuffix(c.Storage.URL, "/") + "/" + c.Storage.Prefix
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + c.Storage.Prefix
	u.RawPath = ""
	return u.String()
}

// icebergLayout is the table's location under storage.prefix and the
// effective file.name_template (see tablepath.Template), or the
// problem, naming its keys.
func (c *Config) icebergLayout() (rel, template string, err error) {
	ns, table, ok := SplitTable(c.Iceberg.Table)
	if !ok {
		return "", "", fmt.Errorf("iceberg.table %q is not namespace.table", c.Iceberg.Table)
	}
	base, err := c.tableBase()
	if err != nil {
		return "", "", err
	}
	loc := tablepath.Location(c.Warehouse(), ns, table)
	if rel, err = tablepath.LocationUnder(base, c.Storage.Prefix, loc); err != nil {
		return "", "", err
	}
	pp, err := tablepath.PartitionPath(c.Iceberg.PartitionBy)
	if err != nil {
		return "", "", err
	}
	return rel, tablepath.Template(rel, pp, c.File.NameTemplate), nil
}

// ApplyIcebergLayout makes Parquet timestamps microseconds (Iceberg's
// unit), adds partition to an envelope's format.fields (a table's files
// hold the Kafka partition, so that every reader sees it; see
// docs/iceberg.md) and file.name_template the table's layout when a
// table is named and the layout holds, so that run, verify and config
// check all see where the files go; checkIceberg reports it otherwise.
// Load applies it; a Config built in code (the demo's) calls it once its
// storage, file and iceberg keys are set. Applying it again changes
// nothing.
func (c *Config) ApplyIcebergLayout() {
	if !c.Iceberg.Enabled() {
		return
	}
	c.Format.Micros = true
	if c.Format.Envelope && len(c.Format.Fields) > 0 && !slices.Contains(c.Format.Fields, "partition") {
		c.Format.Fields = append(slices.Clone(c.Format.Fields), "partition")
	}
	if _, tmpl, err := c.icebergLayout(); err == nil {
		c.File.NameTemplate = tmpl
	}
}

// checkIceberg reports what the iceberg section asks of the others: Parquet
// files, files inside the table's location, one partition value per file.
func (c *Config) checkIceberg(ps *problems) {
	o := &c.Iceberg
	if !o.Enabled() {
		return
	}
	if tablepath.UsesKeyBucket(o.PartitionBy) {
		if !slices.Contains(c.Format.Fields, "key") || !c.Format.Envelope {
			ps.add("iceberg.partition_by", strings.Join(o.PartitionBy, ", "), "buckets the key, which the files hold only with format.envelope: true and key in format.fields; add it, or drop the bucket")
		}
		if c.SchemaRegistry.DecodeKeys() {
			ps.add("iceberg.partition_by", strings.Join(o.PartitionBy, ", "), "buckets the key, but schema_registry.decode %s types the key column by its registry schema, and Iceberg's bucket of a typed column is not the bucket of the key's bytes that Spillway splits files by; set schema_registry.decode: value, or drop the bucket", c.SchemaRegistry.Decode)
		}
	}
	if vf := partvalue.ValueFields(o.PartitionBy); len(vf) > 0 {
		by := strings.Join(o.PartitionBy, ", ")
		switch {
		case c.SchemaRegistry.URL == "" || !c.SchemaRegistry.DecodeValues():
			ps.add("iceberg.partition_by", by, "partitions by the value field %s, which Spillway reads only from values the schema registry types; set schema_registry.url and schema_registry.decode: value (or both), or drop the value field", vf[0].Path)
		case c.Format.Envelope && !slices.Contains(c.Format.Fields, "value"):
			ps.add("iceberg.partition_by", by, "partitions by the value field %s, but format.fields has no value, so the files hold no column of it; add value to format.fields, or drop the value field", vf[0].Path)
		}
	}
	if _, err := tablepath.PartitionPath(o.PartitionBy); err != nil && len(*ps) == 0 {
		ps.add("iceberg.partition_by", strings.Join(o.PartitionBy, ", "), "%v", err)
	}
	if a, b, table := SameTable(o.Table, c.Kafka.Topics); table != "" {
		ps.add("kafka.topics", strings.Join(c.Kafka.Topics, ", "), "has topics %s and %s, which iceberg.table %s both names table %s (a topic's dots become \"_\" in a table name): two topics would be mixed in one table; list one of them, or give the other its own deployment with another iceberg.table", a, b, o.Table, table)
	}
	if c.Format.Type != "parquet" {
		ps.add("format.type", c.Format.Type, "must be parquet when iceberg.table is set: Iceberg tables hold Parquet files here; set format.type: parquet")
	}
	if tablepath.UsesTime(o.PartitionBy) {
		if !slices.Contains(c.Format.Fields, "timestamp") || !c.Format.Envelope {
			ps.add("iceberg.partition_by", strings.Join(o.PartitionBy, ", "), "partitions by timestamp, which the files hold only with format.envelope: true and timestamp in format.fields; add it, or partition by partition")
		}
		if c.File.TimestampSource != "event" {
			ps.add("file.timestamp_source", c.File.TimestampSource, "must be event when iceberg.partition_by uses the timestamp: each file must hold the records of one day or hour by their own timestamps; set file.timestamp_source: event")
		}
		if !slices.Contains([]string{"UTC", "Z", "Etc/UTC", "+00:00"}, c.File.Timezone) {
			ps.add("file.timezone", c.File.Timezone, "must be UTC when iceberg.partition_by uses the timestamp: Iceberg's day and hour are UTC's; set file.timezone: UTC")
		}
	}
	if t, err := naming.Parse(c.File.NameTemplate); err == nil && t.LatestPerKey() {
		ps.add("file.name_template", c.File.NameTemplate, "keeps one object per key, overwritten by the next record, which a table can't hold; use a template with {{start_offset}}")
	}
	if c.Storage.Prefix != "" && !strings.HasSuffix(c.Storage.Prefix, "/") {
		ps.add("storage.prefix", c.Storage.Prefix, "must end with \"/\" (or be empty) when iceberg.table is set: the table's files go in folders under it; such as %s/", c.Storage.Prefix)
		return
	}
	if _, err := c.tableBase(); err != nil && len(*ps) == 0 {
		// An azblob:// container without a known account: its table
		// location can't be named.
		ps.add("storage.url", c.Storage.URL, "%v", err)
		return
	}
	if _, _, err := c.icebergLayout(); err != nil && len(*ps) == 0 {
		ps.add("iceberg.catalog.warehouse", c.Iceberg.Catalog.Warehouse, "puts the table outside where Spillway writes: %v; leave it empty (storage.url + storage.prefix) or set one under them, or change storage.prefix", err)
	}
	if len(*ps) == 0 {
		// What opening the catalog would refuse (a SQLite file in
		// object storage), so that config check says it too.
		ps.absorb("iceberg", o.CheckWarehouse(c.IcebergWarehouse()))
	}
}

// IcebergNotData returns what, under storage.prefix, is the tables' and
// not Spillway's data files: each table's metadata/ folder and the SQL
// catalog's SQLite file (with its -wal and -shm) when it lies inside the
// storage. verify and the demo's check leave them out. nil without a
// table.
func (c *Config) IcebergNotData() func(key string) bool {
	if !c.Iceberg.Enabled() {
		return nil
	}
	rel, _, err := c.icebergLayout()
	if err != nil {
		return nil
	}
	// rel is the table's folder under the prefix; {{topic}} is one path
	// segment.
	before, after, _ := strings.Cut(strings.TrimSuffix(c.Storage.Prefix+rel, "/"), "{{topic}}")
	meta := regexp.MustCompile("^" + regexp.QuoteMeta(before) + "[^/]*" + regexp.QuoteMeta(after) + "/metadata/")
	catalog := c.Storage.Prefix + "catalog.db"
	if uri := strings.TrimPrefix(c.Iceberg.Catalog.URI, "file:"); uri != "" {
		catalog = ""
		if u, err := url.Parse(c.Storage.URL); err == nil && u.Scheme == "file" {
			if r, err := filepath.Rel(u.Path, uri); err == nil && !strings.HasPrefix(r, "..") {
				catalog = filepath.ToSlash(r)
			}
		}
	}
	return func(key string) bool {
		if meta.MatchString(key) {
			return true
		}
		if catalog == "" {
			return false
		}
		rest, ok := strings.CutPrefix(key, catalog)
		return ok && (rest == "" || rest == "-wal" || rest == "-shm" || rest == "-journal")
	}
}
