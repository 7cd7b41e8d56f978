package registry

import (
	"errors"
	"io/fs"
	"net/url"
	"os"

	"github.com/spillway/spillway/internal/keycheck"
)

// Options is the schema_registry section of the config: a
// Confluent-compatible schema registry. URL "" means no registry: keys and
// values are written as the bytes Kafka holds. The koanf tags are the
// public key names (docs/config.md lists them): add keys, never rename
// them.
type Options struct {
	URL string `koanf:"url"` // http://host:8081 or https://...
	// Username and Password are HTTP basic auth (Confluent Cloud's API key
	// and secret); both or neither.
	Username string `koanf:"username"`
	Password string `koanf:"password"` // secret
	// Decode says which record parts are in the wire format: value, key
	// or both. A part not listed is written as its bytes.
	Decode string `koanf:"decode"`
	TLS    TLS    `koanf:"tls"`
}

// TLS is the registry's TLS, used with an https URL: the CA to trust
// instead of the system's (as Kafka's tls.ca_file), and a client certificate
// for mutual TLS.
type TLS struct {
	CAFile   string `koanf:"ca_file"`
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// decodeParts are schema_registry.decode's values, in the order messages
// list them.
var decodeParts = []string{"value", "key", "both"}

// DecodeKeys and DecodeValues say which parts schema_registry.decode
// names; both are false without a registry.
func (o Options) DecodeKeys() bool {
	return o.URL != "" && (o.Decode == "key" || o.Decode == "both")
}

// DecodeValues: see DecodeKeys.
func (o Options) DecodeValues() bool {
	return o.URL != "" && (o.Decode == "value" || o.Decode == "both")
}

// Normalize puts decode in its canonical case, so that the rest of
// Spillway compares plain strings. A value that names no part is left as
// given, for Validate to quote as the user wrote it.
func (o *Options) Normalize() {
	o.Decode = keycheck.Canon(o.Decode, decodeParts)
}

// Validate reports every problem with the section as a *keycheck.Error, or
// nil: each names its schema_registry key, the value when it is not secret,
// and the fix. Nothing is checked without a URL but that no other key of
// the section is set: a password with no registry is a mistake worth
// naming. Decode must be in canonical case (see Normalize).
func (o *Options) Validate() error {
	var ps keycheck.List
	if o.URL == "" {
		for _, k := range []struct{ key, v string }{
			{"schema_registry.username", o.Username},
			{"schema_registry.tls.ca_file", o.TLS.CAFile},
			{"schema_registry.tls.cert_file", o.TLS.CertFile},
			{"schema_registry.tls.key_file", o.TLS.KeyFile},
		} {
			if k.v != "" {
				ps.Add(k.key, k.v, "is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081")
			}
		}
		if o.Password != "" {
			ps.Add("schema_registry.password", "", "is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081")
		}
		return ps.Err()
	}
	u, err := url.Parse(o.URL)
	switch {
	case err != nil:
		ps.Add("schema_registry.url", "", "does not parse as a URL; use http://host:port or https://host:port")
	case u.Scheme != "http" && u.Scheme != "https":
		ps.Add("schema_registry.url", o.URL, "must start with http:// or https://, such as http://127.0.0.1:8081")
	case u.Host == "":
		ps.Add("schema_registry.url", o.URL, "has no host; use http://host:port, such as http://127.0.0.1:8081")
	case u.User != nil:
		// The value is redacted in the message: it holds the credential.
		ps.Add("schema_registry.url", "", "must not carry credentials; set schema_registry.username and schema_registry.password (or their SPILLWAY_SCHEMA_REGISTRY_* variables) instead")
	}
	if (o.Username == "") != (o.Password == "") {
		if o.Username == "" {
			ps.Add("schema_registry.username", "", "required when schema_registry.password is set: basic auth takes both")
		} else {
			ps.Add("schema_registry.password", "", "required when schema_registry.username is set: basic auth takes both (set SPILLWAY_SCHEMA_REGISTRY_PASSWORD to keep it out of the file)")
		}
	}
	ps.OneOf("schema_registry.decode", o.Decode, decodeParts)
	t := o.TLS
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.Add("schema_registry.tls.key_file", "", "required when schema_registry.tls.cert_file is set: a client certificate needs its private key")
	case t.KeyFile != "" && t.CertFile == "":
		ps.Add("schema_registry.tls.cert_file", "", "required when schema_registry.tls.key_file is set: a private key needs its client certificate")
	}
	for _, fl := range []struct{ key, path string }{
		{"schema_registry.tls.ca_file", t.CAFile},
		{"schema_registry.tls.cert_file", t.CertFile},
		{"schema_registry.tls.key_file", t.KeyFile},
	} {
		if fl.path == "" {
			continue
		}
		if err == nil && u.Scheme != "https" {
			ps.Add(fl.key, fl.path, "is set but schema_registry.url is not https://; use an https URL to use TLS")
		}
		switch fi, err := os.Stat(fl.path); {
		case errors.Is(err, fs.ErrNotExist):
			ps.Add(fl.key, fl.path, "does not exist; give the path of a PEM file")
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			ps.Add(fl.key, fl.path, "can't be read: %v", err)
		case fi.IsDir():
			ps.Add(fl.key, fl.path, "is a directory; give the path of a PEM file")
		}
	}
	return ps.Err()
}
