package iceberg

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	spcat "github.com/spillway/spillway/internal/iceberg/catalog"
	"github.com/spillway/spillway/internal/iceberg/maintain"
	"github.com/spillway/spillway/internal/iceberg/tableschema"
	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/naming"
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

// CatalogOptions says which catalog holds the table (package catalog
// opens it).
type CatalogOptions = spcat.Options

// TLS is the REST catalog's TLS.
type TLS = spcat.TLS

// Catalog types.
const (
	TypeSQL  = spcat.TypeSQL
	TypeREST = spcat.TypeREST
	TypeGlue = spcat.TypeGlue
)

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
	o.Catalog.Type = keycheck.Canon(o.Catalog.Type, spcat.Types)
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
			ps.Add("iceberg.catalog.uri", spcat.RedactURI(c.URI), "is set but iceberg.table is empty; set iceberg.table, such as kafka.{{topic}}, or remove the iceberg section")
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
	if ns, _, err := SplitName(o.Name("topic")); err == nil && c.Type == TypeGlue && len(ns) > 1 {
		ps.Add("iceberg.table", o.Table, "has a namespace of %d levels, and a Glue catalog's namespace is one database; use database.table, such as kafka.{{topic}}", len(ns))
	}
	c.Validate(&ps)
	for i, p := range o.PartitionBy {
		if err := tableschema.CheckTransform(p); err != nil {
			ps.Add(fmt.Sprintf("iceberg.partition_by[%d]", i), p, "%v", err)
		}
	}
	if o.CommitInterval <= 0 {
		ps.Add("iceberg.commit_interval", o.CommitInterval.String(), "must be positive; use a duration such as 1m")
	}
	o.ExpireSnapshots.Validate(&ps)
	return ps.Err()
}

// CheckWarehouse reports, as a *keycheck.Error, what Open would refuse about
// the warehouse and the sql catalog's file once the default warehouse
// (storage.url + storage.prefix) is known, so that `config check` says it.
func (o Options) CheckWarehouse(defaultWarehouse string) error {
	if !o.Enabled() {
		return nil
	}
	// Nothing here waits on the network: the AWS config Glue's check
	// loads is the environment's and its files.
	return o.Catalog.Check(context.Background(), defaultWarehouse)
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
