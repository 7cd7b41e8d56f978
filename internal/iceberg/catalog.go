package iceberg

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	spcat "github.com/spillway/spillway/internal/iceberg/catalog"
)

// CatalogName is the name Spillway gives its catalog (spcat.Name).
const CatalogName = spcat.Name

// Catalog is an open catalog (package catalog opens it) with the table
// options. Its methods may be called from several goroutines.
type Catalog struct {
	opts  Options
	open  *spcat.Catalog
	cat   catalog.Catalog
	props iceberg.Properties
}

// Open opens the catalog the options name. defaultWarehouse is
// storage.url + storage.prefix, as Spillway writes it: it is the
// warehouse when iceberg.catalog.warehouse is empty. A problem with the
// options is a *keycheck.Error naming the key.
func Open(ctx context.Context, o Options, defaultWarehouse string) (*Catalog, error) {
	c, err := spcat.Open(ctx, o.Catalog, defaultWarehouse)
	if err != nil {
		return nil, err
	}
	return &Catalog{opts: o, open: c, cat: c, props: c.Props()}, nil
}

// Close releases the catalog's connections.
func (c *Catalog) Close() error { return c.open.Close() }

// scrub hides the catalog's credentials in a library's error and says
// what to fix where the catalog can tell (spcat.Catalog.Scrub).
func (c *Catalog) scrub(err error) error { return c.open.Scrub(err) }

// Location is the location of table name ("ns.table") when Spillway creates
// it: the warehouse, then the namespace levels with ".db" (the Hive and
// iceberg-go layout), then the table. Its data files go under Location +
// "/data/". A table that already exists keeps its own location: see
// Table.Location.
func (c *Catalog) Location(name string) string {
	ns, tbl, err := SplitName(name)
	if err != nil {
		return ""
	}
	return c.open.Warehouse() + "/" + strings.Join(ns, ".") + ".db/" + tbl
}

// Table returns table name ("ns.table", {{topic}} already resolved). It is
// loaded when it exists; otherwise, with auto_create, it is created (with
// its namespace) by the first Commit, from the first file's schema.
func (c *Catalog) Table(ctx context.Context, name string) (*Table, error) {
	ns, tbl, err := SplitName(name)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table name %q %w", name, err)
	}
	t := &Table{c: c, name: name, ident: append(table.Identifier{}, append(ns, tbl)...)}
	if _, err := t.refresh(ctx); err != nil {
		return nil, err
	}
	if !t.exists() && !c.opts.AutoCreate {
		// Say which is missing: a namespace (a Glue database) is made by
		// hand, or by a typo in iceberg.table.
		if ok, err := c.cat.CheckNamespaceExists(ctx, ns); err == nil && !ok {
			return nil, fmt.Errorf("iceberg: namespace %s of table %s does not exist and iceberg.auto_create is false; create the namespace and the table, or set iceberg.auto_create: true", strings.Join(ns, "."), name)
		}
		return nil, fmt.Errorf("iceberg: table %s does not exist and iceberg.auto_create is false; create it, or set iceberg.auto_create: true", name)
	}
	return t, nil
}

// TableBase is the root under which a table names the keys of
// storageURL (spcat.TableBase).
func TableBase(storageURL string) (string, error) { return spcat.TableBase(storageURL) }

// MissingSQLite returns the SQL catalog's SQLite file when it does not
// exist yet (spcat.Options.MissingSQLite).
func (o Options) MissingSQLite(defaultWarehouse string) (string, bool) {
	return o.Catalog.MissingSQLite(defaultWarehouse)
}

// Redacted returns the options with every credential replaced by
// redact.Mark, for `config check` and logs.
func (o Options) Redacted() Options {
	o.Catalog = o.Catalog.Redacted()
	return o
}
