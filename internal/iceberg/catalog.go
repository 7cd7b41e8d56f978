package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	// FileIO backends for the warehouses Spillway's storage also writes.
	_ "github.com/apache/iceberg-go/io/gocloud/azure"
	_ "github.com/apache/iceberg-go/io/gocloud/gcs"
	_ "github.com/apache/iceberg-go/io/gocloud/s3"

	// The pure-Go SQLite driver, registered as "sqlite", for the sql
	// catalog.
	_ "modernc.org/sqlite"

	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/redact"
	"github.com/spillway/spillway/internal/tlsfiles"
)

// CatalogName is the name Spillway gives its catalog. The sql catalog
// stores it in every row (catalog_name): another engine reading the same
// SQLite file must name its catalog so too.
const CatalogName = "spillway"

// sqliteBusyMillis is how long a SQLite connection waits for another
// writer's lock (another instance committing to the same file) before
// failing: commits hold it for milliseconds.
const sqliteBusyMillis = 30000

// Catalog is an open catalog. Its methods may be called from several
// goroutines.
type Catalog struct {
	opts      Options
	cat       catalog.Catalog
	db        *sql.DB // the sql catalog's database; nil for rest
	warehouse string  // the location new tables go under
	props     iceberg.Properties
	secrets   []string
}

// resolved is what Open derives from the options.
type resolved struct {
	warehouse string             // location URI, no query
	props     iceberg.Properties // catalog and FileIO properties
	sqlite    string             // the sql catalog's file
}

// Open opens the catalog the options name. defaultWarehouse is
// storage.url + storage.prefix, as Spillway writes it (a local path, or an
// s3:// or gs:// URL whose query carries endpoint and region): it is the
// warehouse when iceberg.catalog.warehouse is empty. A problem with the
// options is a *keycheck.Error naming the key.
func Open(ctx context.Context, o Options, defaultWarehouse string) (*Catalog, error) {
	r, err := o.resolve(defaultWarehouse)
	if err != nil {
		return nil, err
	}
	c := &Catalog{opts: o, warehouse: r.warehouse, props: r.props, secrets: append(o.secrets(), azureSecrets(r.props)...)}
	switch o.Catalog.Type {
	case TypeSQL:
		if err := os.MkdirAll(filepath.Dir(r.sqlite), 0o755); err != nil {
			return nil, fmt.Errorf("iceberg: sql catalog %s: %w", r.sqlite, err)
		}
		dsn := "file:" + r.sqlite + fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_txlock=immediate", sqliteBusyMillis)
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("iceberg: sql catalog %s: %w", r.sqlite, err)
		}
		cat, err := sqlcat.NewCatalog(CatalogName, db, sqlcat.SQLite, r.props)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("iceberg: sql catalog %s: %w", r.sqlite, c.scrub(err))
		}
		c.cat, c.db = cat, db
	case TypeREST:
		opts := []rest.Option{rest.WithAdditionalProps(r.props)}
		if w := o.Catalog.Warehouse; w != "" {
			opts = append(opts, rest.WithWarehouseLocation(w))
		}
		if o.Catalog.Credential != "" {
			opts = append(opts, rest.WithCredential(o.Catalog.Credential))
		}
		if o.Catalog.Token != "" {
			opts = append(opts, rest.WithOAuthToken(o.Catalog.Token))
		}
		if t := o.Catalog.TLS; t.CAFile != "" || t.CertFile != "" {
			tc, err := tlsfiles.Config("iceberg.catalog.tls", tlsfiles.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile})
			if err != nil {
				return nil, err
			}
			opts = append(opts, rest.WithTLSConfig(tc))
		}
		cat, err := rest.NewCatalog(ctx, CatalogName, o.Catalog.URI, opts...)
		if err != nil {
			return nil, fmt.Errorf("iceberg: rest catalog %s: %w", redactURI(o.Catalog.URI), c.scrub(err))
		}
		c.cat = cat
	default:
		return nil, fmt.Errorf("iceberg.catalog.type %q is not supported; use sql or rest", o.Catalog.Type)
	}
	return c, nil
}

// Close releases the catalog's connections.
func (c *Catalog) Close() error {
	var err error
	if cl, ok := c.cat.(catalog.Closer); ok {
		err = cl.Close()
	}
	if c.db != nil {
		err = errors.Join(err, c.db.Close())
	}
	return err
}

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
	return c.warehouse + "/" + strings.Join(ns, ".") + ".db/" + tbl
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
		return nil, fmt.Errorf("iceberg: table %s does not exist and iceberg.auto_create is false; create it, or set iceberg.auto_create: true", name)
	}
	return t, nil
}

// resolve checks the warehouse and the sql catalog's file, and derives the
// catalog's properties.
func (o Options) resolve(defaultWarehouse string) (resolved, error) {
	var ps keycheck.List
	raw, key := o.Catalog.Warehouse, "iceberg.catalog.warehouse"
	if raw == "" || restWarehouseName(o.Catalog) {
		raw, key = defaultWarehouse, "storage.url"
	}
	var r resolved
	wh, err := warehouseLocation(raw)
	if err != nil {
		ps.Add(key, redactURI(raw), "%v", err)
		return r, ps.Err()
	}
	r.warehouse = wh.location
	r.props = iceberg.Properties{"warehouse": wh.location}
	maps.Copy(r.props, wh.props)
	maps.Copy(r.props, o.Catalog.props())
	if o.Catalog.Type == TypeSQL {
		switch {
		case o.Catalog.URI != "":
			r.sqlite = strings.TrimPrefix(o.Catalog.URI, "file:")
		case strings.HasPrefix(wh.location, "file://"):
			r.sqlite = filepath.Join(strings.TrimPrefix(wh.location, "file://"), "catalog.db")
		default:
			ps.Add("iceberg.catalog.uri", "", "is required when the warehouse (%s) is not a local directory: a SQLite file can't live in object storage; give a local path, such as /var/lib/spillway/catalog.db", redactURI(raw))
		}
	}
	return r, ps.Err()
}

// restWarehouseName reports whether iceberg.catalog.warehouse is a REST
// catalog's warehouse name (as Polaris and Lakekeeper take it) rather
// than a location: it is then sent to the catalog, and tables go under
// the default warehouse.
func restWarehouseName(c CatalogOptions) bool {
	return c.Type == TypeREST && c.Warehouse != "" && !strings.Contains(c.Warehouse, "://")
}

type warehouse struct {
	location string
	props    map[string]string
}

// warehouseLocation turns a warehouse as Spillway's storage takes it (a
// local path, file://, or s3:// or gs:// with query parameters) into the
// location Iceberg records and the FileIO properties it needs. Locations
// are written without the query: an Iceberg location is a plain URI, and
// every engine that reads the table brings its own endpoint.
func warehouseLocation(raw string) (warehouse, error) {
	if raw == "" {
		return warehouse{}, errors.New("is empty; set iceberg.catalog.warehouse or storage.url")
	}
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return warehouse{}, fmt.Errorf("is not a usable path: %w", err)
		}
		return warehouse{location: "file://" + filepath.ToSlash(abs)}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return warehouse{}, errors.New("does not parse as a URL")
	}
	q := u.Query()
	container := u.User // abfs://container@account...: the container, no credential
	u.RawQuery, u.Fragment, u.User = "", "", nil
	loc := strings.TrimRight(u.String(), "/")
	switch u.Scheme {
	case "file":
		return warehouse{location: loc}, nil
	case "s3", "s3a":
		p := map[string]string{}
		if v := q.Get("endpoint"); v != "" {
			p[iceio.S3EndpointURL] = v
		}
		if v := q.Get("region"); v != "" {
			p[iceio.S3Region] = v
		}
		return warehouse{location: loc, props: p}, nil
	case "gs":
		p := map[string]string{}
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			// The GCS client's emulator variable; iceberg-go's FileIO
			// takes the endpoint as a property instead.
			if !strings.Contains(h, "://") {
				h = "http://" + h
			}
			p[iceio.GCSEndpoint] = h + "/storage/v1/"
			p[iceio.GCSNoAuth] = "true"
		}
		return warehouse{location: loc, props: p}, nil
	case "abfs", "abfss", "wasb", "wasbs":
		// Iceberg's Azure locations; the adls.* properties say how to
		// reach and authenticate to the account.
		if container == nil || container.Username() == "" {
			return warehouse{}, fmt.Errorf("names no container; write %s://container@account.dfs.core.windows.net/prefix", u.Scheme)
		}
		u.User = url.User(container.Username())
		return warehouse{location: strings.TrimRight(u.String(), "/"), props: azureProps(u.Host)}, nil
	case "azblob":
		// Spillway's storage scheme, which no Iceberg engine reads.
		return warehouse{}, errors.New("is Spillway's storage scheme, not an Iceberg location; a table names an Azure container abfs://container@account.dfs.core.windows.net/prefix, or leave iceberg.catalog.warehouse empty for storage.url + storage.prefix")
	default:
		return warehouse{}, fmt.Errorf("has scheme %s, which is not an Iceberg warehouse; use a local directory, s3:// or gs://", u.Scheme)
	}
}

// secretProp reports whether a catalog property holds a credential.
func secretProp(k string) bool {
	k = strings.ToLower(k)
	for _, p := range []string{"secret", "token", "credential", "password", "key", "sas", "connection-string"} {
		if strings.Contains(k, p) && !strings.HasSuffix(k, "key-id") && !strings.HasSuffix(k, "keypath") {
			return true
		}
	}
	return false
}

// secrets are the credential values the options hold, for scrub.
func (o Options) secrets() []string {
	var out []string
	add := func(v string) {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	add(o.Catalog.Token)
	add(o.Catalog.Credential)
	if _, s, ok := strings.Cut(o.Catalog.Credential, ":"); ok {
		add(s)
	}
	for k, v := range o.Catalog.props() {
		if secretProp(k) {
			add(v)
		}
	}
	out = append(out, redact.Secrets(o.Catalog.URI)...)
	return out
}

// Redacted returns the options with every credential replaced by
// redact.Mark, for `config check` and logs.
func (o Options) Redacted() Options {
	c := o.Catalog
	if c.Credential != "" {
		c.Credential = redact.Mark
	}
	if c.Token != "" {
		c.Token = redact.Mark
	}
	c.URI = redactURI(c.URI)
	c.Warehouse = redactURI(c.Warehouse)
	if c.Properties != nil {
		p := make([]string, len(c.Properties))
		for i, kv := range c.Properties {
			if k, _, ok := strings.Cut(kv, "="); ok && secretProp(k) {
				kv = k + "=" + redact.Mark
			}
			p[i] = kv
		}
		c.Properties = p
	}
	o.Catalog = c
	return o
}

func redactURI(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return redact.URL(s)
}

// scrubbed is an error whose text has the catalog's credentials replaced;
// it still wraps the original for errors.Is.
type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// scrub hides the catalog's credentials in a library's error, which may
// quote a request or a property.
func (c *Catalog) scrub(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range c.secrets {
		if strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, redact.Mark)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

// MissingSQLite returns the SQL catalog's SQLite file when it does not
// exist yet. Opening the catalog creates it, and its tables: a reader
// such as verify checks this first, and reads "no catalog" as "no table".
func (o Options) MissingSQLite(defaultWarehouse string) (string, bool) {
	if o.Catalog.Type != TypeSQL {
		return "", false
	}
	r, err := o.resolve(defaultWarehouse)
	if err != nil || r.sqlite == "" {
		return "", false
	}
	if _, err := os.Stat(r.sqlite); errors.Is(err, fs.ErrNotExist) {
		return r.sqlite, true
	}
	return "", false
}
