package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/naming"
)

// Iceberg is the iceberg section: commit the data files to Apache Iceberg
// tables (docs/iceberg-wiring.md). It stands in for package iceberg's
// Options, which brings the catalogs and validates the catalog's keys
// itself; the keys and defaults are the same. The checks here are the
// section's own, minimal ones; those that involve other sections are
// Config.checkIceberg's, and stay when the type is replaced.
type Iceberg struct {
	// Table is "namespace.table"; the table part may use {{topic}}, one
	// table per topic. "" writes plain files.
	Table          string         `koanf:"table"`
	Catalog        IcebergCatalog `koanf:"catalog"`
	PartitionBy    []string       `koanf:"partition_by"`
	CommitInterval time.Duration  `koanf:"commit_interval"`
	AutoCreate     bool           `koanf:"auto_create"`
	EvolveSchema   bool           `koanf:"evolve_schema"`
}

// IcebergCatalog is where the tables are recorded.
type IcebergCatalog struct {
	Type      string `koanf:"type"` // sql | rest | glue
	URI       string `koanf:"uri"`
	Warehouse string `koanf:"warehouse"` // "" = storage.url + storage.prefix
	// Credential is a REST catalog's OAuth2 client credential
	// ("id:secret"), Token its bearer token. Both are secrets.
	Credential string            `koanf:"credential"`
	Token      string            `koanf:"token"`
	TLS        IcebergCatalogTLS `koanf:"tls"`
}

// IcebergCatalogTLS is the REST catalog's TLS: the CA to trust instead of
// the system's.
type IcebergCatalogTLS struct {
	CAFile string `koanf:"ca_file"`
}

var (
	catalogTypes = []string{"sql", "rest", "glue"}
	// icebergSecrets are redacted everywhere (keys.go's secretKeys).
	icebergSecrets = []string{"iceberg.catalog.credential", "iceberg.catalog.token"}
)

// defaultIceberg is the section's defaults: off, with the embedded SQL
// catalog ready when a table is named.
func defaultIceberg() Iceberg {
	return Iceberg{Catalog: IcebergCatalog{Type: "sql"}, CommitInterval: time.Minute, AutoCreate: true, EvolveSchema: true}
}

// Enabled reports whether a table is named.
func (o *Iceberg) Enabled() bool { return o.Table != "" }

// Normalize puts enumerated values in canonical form.
func (o *Iceberg) Normalize() {
	o.Table = strings.TrimSpace(o.Table)
	o.Catalog.Type = keycheck.Canon(o.Catalog.Type, catalogTypes)
	for i, t := range o.PartitionBy {
		o.PartitionBy[i] = naming.CanonTransform(t)
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

// tablePart is what a namespace or table name may hold; {{topic}} is
// checked apart.
func tablePart(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return s != ""
}

// Validate reports the section's own problems as a *keycheck.Error, or nil.
// Nothing but stray keys is checked while iceberg.table is empty.
func (o *Iceberg) Validate() error {
	var ps keycheck.List
	if !o.Enabled() {
		if len(o.PartitionBy) > 0 {
			ps.Add("iceberg.partition_by", strings.Join(o.PartitionBy, ", "), "is set but iceberg.table is empty; name the table, such as kafka.events, or remove it")
		}
		return ps.Err()
	}
	ns, table, ok := SplitTable(o.Table)
	rest := strings.ReplaceAll(table, "{{topic}}", "x")
	v := strings.Index(o.Table, "{{")
	switch {
	case v >= 0 && v < strings.LastIndex(o.Table, "."):
		ps.Add("iceberg.table", o.Table, "uses a variable in the namespace; only the table part, after the last '.', may use {{topic}}, such as kafka.{{topic}}")
	case !ok:
		ps.Add("iceberg.table", o.Table, "must be \"namespace.table\", such as kafka.events or kafka.{{topic}}")
	case strings.Contains(rest, "{{") || strings.Contains(rest, "}}"):
		ps.Add("iceberg.table", o.Table, "uses a variable other than {{topic}}; only {{topic}} is known")
	case !tablePart(ns) || !tablePart(rest) || strings.Contains(rest, "."):
		ps.Add("iceberg.table", o.Table, "may hold only letters, digits, '_' and '-' (and '.' between namespace levels), and {{topic}} in the table part")
	}
	ps.OneOf("iceberg.catalog.type", o.Catalog.Type, catalogTypes)
	c := o.Catalog
	switch c.Type {
	case "rest":
		if u, err := url.Parse(c.URI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.Add("iceberg.catalog.uri", redactedURI(c.URI), "must be the REST catalog's http:// or https:// URL, such as http://127.0.0.1:8181")
		} else if u.User != nil {
			ps.Add("iceberg.catalog.uri", "", "must not carry credentials; set iceberg.catalog.credential or iceberg.catalog.token instead")
		}
		if c.Credential != "" && c.Token != "" {
			ps.Add("iceberg.catalog.token", "", "is set as well as iceberg.catalog.credential; set one of the two")
		}
	case "sql", "glue":
		for _, k := range []struct{ key, v string }{{"iceberg.catalog.credential", c.Credential}, {"iceberg.catalog.token", c.Token}} {
			if k.v != "" {
				ps.Add(k.key, "", "is set but iceberg.catalog.type is %s, which takes none; remove it, or use type rest", c.Type)
			}
		}
		if c.TLS.CAFile != "" {
			ps.Add("iceberg.catalog.tls.ca_file", c.TLS.CAFile, "is set but iceberg.catalog.type is %s; TLS is the rest catalog's", c.Type)
		}
	}
	for _, t := range o.PartitionBy {
		if _, err := naming.IcebergPartitionPath([]string{t}); err != nil {
			ps.Add("iceberg.partition_by", t, "%v", err)
		}
	}
	if _, err := naming.IcebergPartitionPath(o.PartitionBy); err != nil && len(ps) == 0 {
		ps.Add("iceberg.partition_by", strings.Join(o.PartitionBy, ", "), "%v", err)
	}
	if o.CommitInterval < time.Second || o.CommitInterval > 24*time.Hour {
		ps.Add("iceberg.commit_interval", o.CommitInterval.String(), "is out of range; use a duration from 1s to 24h, such as 1m")
	}
	return ps.Err()
}

// redactedURI is uri with any credential in it hidden.
func redactedURI(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.User != nil {
		return ""
	}
	return uri
}

// Warehouse is iceberg.catalog.warehouse, or its default: storage.url
// with storage.prefix (its query, such as s3's region, left out).
func (c *Config) Warehouse() string {
	if w := c.Iceberg.Catalog.Warehouse; w != "" {
		return w
	}
	u, err := url.Parse(c.Storage.URL)
	if err != nil {
		return ""
	}
	u.RawQuery = ""
	return strings.TrimSuffix(u.String(), "/") + "/" + c.Storage.Prefix
}

// icebergLayout is the table's location under storage.prefix and the
// effective file.name_template (see naming.IcebergTemplate), or the
// problem, naming its keys.
func (c *Config) icebergLayout() (rel, template string, err error) {
	ns, table, ok := SplitTable(c.Iceberg.Table)
	if !ok {
		return "", "", fmt.Errorf("iceberg.table %q is not namespace.table", c.Iceberg.Table)
	}
	loc := naming.TableLocation(c.Warehouse(), ns, table)
	if rel, err = naming.LocationUnder(c.Storage.URL, c.Storage.Prefix, loc); err != nil {
		return "", "", err
	}
	pp, err := naming.IcebergPartitionPath(c.Iceberg.PartitionBy)
	if err != nil {
		return "", "", err
	}
	return rel, naming.IcebergTemplate(rel, pp, c.File.NameTemplate), nil
}

// ApplyIcebergLayout makes file.name_template the table's layout when a
// table is named and the layout holds, so that run, verify and config
// check all see where the files go; checkIceberg reports it otherwise.
// Load applies it; a Config built in code (the demo's) calls it once its
// storage, file and iceberg keys are set. Applying it again changes
// nothing.
func (c *Config) ApplyIcebergLayout() {
	if !c.Iceberg.Enabled() {
		return
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
	if c.Format.Type != "parquet" {
		ps.add("format.type", c.Format.Type, "must be parquet when iceberg.table is set: Iceberg tables hold Parquet files here; set format.type: parquet")
	}
	if naming.UsesTime(o.PartitionBy) {
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
	if _, _, err := c.icebergLayout(); err != nil && len(*ps) == 0 {
		ps.add("iceberg.catalog.warehouse", c.Iceberg.Catalog.Warehouse, "puts the table outside where Spillway writes: %v; leave it empty (storage.url + storage.prefix) or set one under them, or change storage.prefix", err)
	}
}
