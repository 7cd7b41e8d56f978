package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/redact"
)

// Options is the config's iceberg.catalog section. The koanf tags are the
// public key names (docs/config.md lists them): add keys, never rename
// them.
type Options struct {
	// Type is sql (embedded SQLite), rest or glue.
	Type string `koanf:"type"`
	// URI is, for sql, the SQLite file's path ("" = catalog.db in a local
	// warehouse); for rest, the catalog's http(s) URL; for glue, an
	// endpoint that replaces the region's (a VPC endpoint), or "".
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
	// Region is a Glue catalog's AWS region; "" takes the AWS default
	// chain's (AWS_REGION, the profile's region).
	Region string `koanf:"region"`
	// CatalogID is the Glue Data Catalog's id (the AWS account that owns
	// it); "" is the credentials' own account.
	CatalogID string `koanf:"catalog_id"`
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

// Types are the catalog types, for keycheck.Canon.
var Types = []string{TypeSQL, TypeREST, TypeGlue}

// regionRE is an AWS region's shape (us-east-1, us-gov-west-1,
// eu-central-2): Glue's host name is built from it, so anything else
// names no endpoint.
var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// catalogIDRE is a Glue catalog id: an account id, or a federated
// catalog's account:catalog/... path.
var catalogIDRE = regexp.MustCompile(`^[0-9]{12}(:[A-Za-z0-9_/.-]+)?$`)

// Validate adds to ps every problem with the section, naming the key, the
// value when it is not secret, and the fix.
func (c Options) Validate(ps *keycheck.List) {
	ps.OneOf("iceberg.catalog.type", c.Type, Types)
	switch c.Type {
	case TypeSQL:
		if strings.Contains(c.URI, "://") && !strings.HasPrefix(c.URI, "file:") {
			ps.Add("iceberg.catalog.uri", redactURI(c.URI), "is not a SQLite file; the sql catalog takes a local file path, such as /var/lib/spillway/catalog.db")
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
	case TypeGlue:
		c.validateGlue(ps)
	}
	if c.Type != TypeREST {
		for _, k := range []struct{ key, v string }{
			{"iceberg.catalog.credential", c.Credential},
			{"iceberg.catalog.token", c.Token},
		} {
			if k.v == "" {
				continue
			}
			fix := "it is for a rest catalog"
			if c.Type == TypeGlue {
				fix = "it is for a rest catalog; Glue takes the AWS credentials of the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance's role)"
			}
			ps.Add(k.key, "", "is set but iceberg.catalog.type is %s; %s", c.Type, fix)
		}
	}
	if c.Type != TypeGlue {
		for _, k := range []struct{ key, v string }{
			{"iceberg.catalog.region", c.Region},
			{"iceberg.catalog.catalog_id", c.CatalogID},
		} {
			if k.v != "" {
				ps.Add(k.key, k.v, "is set but iceberg.catalog.type is %s; it is for a glue catalog", c.Type)
			}
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
			if SecretProp(name) {
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
}

func (c Options) validateGlue(ps *keycheck.List) {
	if c.Region != "" && !regionRE.MatchString(c.Region) {
		ps.Add("iceberg.catalog.region", c.Region, "is not an AWS region; give one such as us-east-1 or eu-west-1")
	}
	if c.CatalogID != "" && !catalogIDRE.MatchString(c.CatalogID) {
		ps.Add("iceberg.catalog.catalog_id", c.CatalogID, "is not a Glue catalog id; give the 12-digit AWS account id that owns the catalog, such as 123456789012, or leave it empty for the credentials' own account")
	}
	if c.URI != "" {
		u, err := url.Parse(c.URI)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			ps.Add("iceberg.catalog.uri", redactURI(c.URI), "is not an http(s) URL; for glue it replaces the region's endpoint, such as https://vpce-0123-abcd.glue.us-east-1.vpce.amazonaws.com, or leave it empty")
		case u.User != nil:
			ps.Add("iceberg.catalog.uri", "", "must not carry credentials; Glue takes the AWS credentials of the environment")
		}
	}
	if restWarehouseName(Options{Type: TypeREST, Warehouse: c.Warehouse}) {
		ps.Add("iceberg.catalog.warehouse", c.Warehouse, "is not a location; a glue catalog's warehouse is where its tables go, such as s3://bucket/warehouse, or leave it empty for storage.url + storage.prefix")
	}
}

// props are Properties as a map; items without "=" (which Validate
// refuses) are left out.
func (c Options) props() map[string]string {
	out := map[string]string{}
	for _, p := range c.Properties {
		if k, v, ok := strings.Cut(p, "="); ok {
			out[strings.TrimSpace(k)] = v
		}
	}
	return out
}

// restWarehouseName reports whether iceberg.catalog.warehouse is a REST
// catalog's warehouse name (as Polaris and Lakekeeper take it) rather
// than a location: it is then sent to the catalog, and tables go under
// the default warehouse.
func restWarehouseName(c Options) bool {
	return c.Type == TypeREST && c.Warehouse != "" && !strings.Contains(c.Warehouse, "://")
}

// SecretProp reports whether a catalog property holds a credential.
func SecretProp(k string) bool {
	k = strings.ToLower(k)
	for _, p := range []string{"secret", "token", "credential", "password", "key", "sas", "connection-string"} {
		if strings.Contains(k, p) && !strings.HasSuffix(k, "key-id") && !strings.HasSuffix(k, "keypath") {
			return true
		}
	}
	return false
}

// secrets are the credential values the options hold, for Scrub.
func (c Options) secrets() []string {
	var out []string
	add := func(v string) {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	add(c.Token)
	add(c.Credential)
	if _, s, ok := strings.Cut(c.Credential, ":"); ok {
		add(s)
	}
	for k, v := range c.props() {
		if SecretProp(k) {
			add(v)
		}
	}
	out = append(out, redact.Secrets(c.URI)...)
	return out
}

// Redacted returns the options with every credential replaced by
// redact.Mark, for `config check` and logs.
func (c Options) Redacted() Options {
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
			if k, _, ok := strings.Cut(kv, "="); ok && SecretProp(k) {
				kv = k + "=" + redact.Mark
			}
			p[i] = kv
		}
		c.Properties = p
	}
	return c
}

// RedactURI is s with the credentials of a URL hidden; a path is left as
// it is.
func RedactURI(s string) string { return redactURI(s) }

func redactURI(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return redact.URL(s)
}
