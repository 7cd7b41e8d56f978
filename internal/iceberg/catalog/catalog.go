// Package catalog opens the Iceberg catalog that holds Spillway's tables:
// the embedded SQL catalog (a SQLite file), a REST catalog, or AWS Glue,
// through iceberg-go's own clients. It resolves the warehouse (storage.url
// + storage.prefix by default) into the location and FileIO properties
// each catalog needs, and keeps the catalog's credentials out of every
// error it returns. Package iceberg commits to the tables; this package
// knows nothing of them.
package catalog

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
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/aws/aws-sdk-go-v2/aws"

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

// Name is the name Spillway gives its catalog. The sql catalog stores it
// in every row (catalog_name): another engine reading the same SQLite
// file must name its catalog so too.
const Name = "spillway"

// sqliteBusyMillis is how long a SQLite connection waits for another
// writer's lock (another instance committing to the same file) before
// failing: commits hold it for milliseconds.
const sqliteBusyMillis = 30000

// Catalog is an open catalog: iceberg-go's, with the warehouse and FileIO
// properties Spillway resolved for it. Its methods may be called from
// several goroutines.
type Catalog struct {
	icecat.Catalog
	db        *sql.DB // the sql catalog's database; nil otherwise
	warehouse string
	props     iceberg.Properties
	secrets   []string
	glue      *glueInfo // nil unless glue
}

// Warehouse is the location new tables go under, without a trailing "/".
func (c *Catalog) Warehouse() string { return c.warehouse }

// Props are the catalog's and its FileIO's properties.
func (c *Catalog) Props() iceberg.Properties { return c.props }

// resolved is what Open derives from the options.
type resolved struct {
	warehouse string             // location URI, no query
	props     iceberg.Properties // catalog and FileIO properties
	sqlite    string             // the sql catalog's file
	aws       aws.Config         // glue's
}

// Open opens the catalog the options name. defaultWarehouse is
// storage.url + storage.prefix, as Spillway writes it (a local path, or an
// s3:// or gs:// URL whose query carries endpoint and region): it is the
// warehouse when iceberg.catalog.warehouse is empty. A problem with the
// options is a *keycheck.Error naming the key.
func Open(ctx context.Context, o Options, defaultWarehouse string) (*Catalog, error) {
	r, err := o.resolve(ctx, defaultWarehouse)
	if err != nil {
		return nil, err
	}
	c := &Catalog{warehouse: r.warehouse, props: r.props, secrets: append(o.secrets(), azureSecrets(r.props)...)}
	switch o.Type {
	case TypeSQL:
		if err := os.MkdirAll(filepath.Dir(r.sqlite), 0o755); err != nil {
			return nil, fmt.Errorf("iceberg: sql catalog %s: %w", r.sqlite, err)
		}
		dsn := "file:" + r.sqlite + fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_txlock=immediate", sqliteBusyMillis)
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("iceberg: sql catalog %s: %w", r.sqlite, err)
		}
		cat, err := sqlcat.NewCatalog(Name, db, sqlcat.SQLite, r.props)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("iceberg: sql catalog %s: %w", r.sqlite, c.Scrub(err))
		}
		c.Catalog, c.db = cat, db
	case TypeREST:
		opts := []rest.Option{rest.WithAdditionalProps(r.props)}
		if w := o.Warehouse; w != "" {
			opts = append(opts, rest.WithWarehouseLocation(w))
		}
		if o.Credential != "" {
			opts = append(opts, rest.WithCredential(o.Credential))
		}
		if o.Token != "" {
			opts = append(opts, rest.WithOAuthToken(o.Token))
		}
		if t := o.TLS; t.CAFile != "" || t.CertFile != "" {
			tc, err := tlsfiles.Config("iceberg.catalog.tls", tlsfiles.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile})
			if err != nil {
				return nil, err
			}
			opts = append(opts, rest.WithTLSConfig(tc))
		}
		cat, err := rest.NewCatalog(ctx, Name, o.URI, opts...)
		if err != nil {
			return nil, fmt.Errorf("iceberg: rest catalog %s: %w", redactURI(o.URI), c.Scrub(err))
		}
		c.Catalog = cat
	case TypeGlue:
		if err := c.openGlue(o, r); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("iceberg.catalog.type %q is not supported; use sql, rest or glue", o.Type)
	}
	return c, nil
}

// Close releases the catalog's connections.
func (c *Catalog) Close() error {
	var err error
	if cl, ok := c.Catalog.(icecat.Closer); ok {
		err = cl.Close()
	}
	if c.db != nil {
		err = errors.Join(err, c.db.Close())
	}
	return err
}

// Check reports, as a *keycheck.Error, what Open would refuse about the
// warehouse, the sql catalog's file and glue's region once the default
// warehouse (storage.url + storage.prefix) is known, so that `config
// check` says it.
func (o Options) Check(ctx context.Context, defaultWarehouse string) error {
	_, err := o.resolve(ctx, defaultWarehouse)
	return err
}

// resolve checks the warehouse, the sql catalog's file and glue's AWS
// config, and derives the catalog's properties.
func (o Options) resolve(ctx context.Context, defaultWarehouse string) (resolved, error) {
	var ps keycheck.List
	raw, key := o.Warehouse, "iceberg.catalog.warehouse"
	if raw == "" || restWarehouseName(o) {
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
	maps.Copy(r.props, o.props())
	switch o.Type {
	case TypeSQL:
		switch {
		case o.URI != "":
			r.sqlite = strings.TrimPrefix(o.URI, "file:")
		case strings.HasPrefix(wh.location, "file://"):
			r.sqlite = filepath.Join(strings.TrimPrefix(wh.location, "file://"), "catalog.db")
		default:
			ps.Add("iceberg.catalog.uri", "", "is required when the warehouse (%s) is not a local directory: a SQLite file can't live in object storage; give a local path, such as /var/lib/spillway/catalog.db", redactURI(raw))
		}
	case TypeGlue:
		r.aws, err = o.awsConfig(ctx, r.props, &ps)
		if err != nil {
			return r, err
		}
	}
	return r, ps.Err()
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

// scrubbed is an error whose text has the catalog's credentials replaced;
// it still wraps the original for errors.Is.
type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// Scrub hides the catalog's credentials in a library's error, which may
// quote a request or a property, and says what to fix when the catalog
// refused the credentials or named no such place.
func (c *Catalog) Scrub(err error) error {
	if err == nil {
		return nil
	}
	if c.glue != nil {
		err = c.glue.explain(err)
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
	if o.Type != TypeSQL {
		return "", false
	}
	r, err := o.resolve(context.Background(), defaultWarehouse)
	if err != nil || r.sqlite == "" {
		return "", false
	}
	if _, err := os.Stat(r.sqlite); errors.Is(err, fs.ErrNotExist) {
		return r.sqlite, true
	}
	return "", false
}
