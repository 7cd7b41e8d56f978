package config

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
)

// check validates schema_registry. Nothing is checked without a URL but that no other key of the section is set: a
// password with no registry is a mistake worth naming.
func (s *SchemaRegistry) check(ps *problems) {
	if s.URL == "" {
		for _, k := range []struct{ key, v string }{
			{"schema_registry.username", s.Username},
			{"schema_registry.tls.ca_file", s.TLS.CAFile},
			{"schema_registry.tls.cert_file", s.TLS.CertFile},
			{"schema_registry.tls.key_file", s.TLS.KeyFile},
		} {
			if k.v != "" {
				ps.add(k.key, k.v, "is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081")
			}
		}
		if s.Password != "" {
			ps.add("schema_registry.password", "", "is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081")
		}
		return
	}
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		ps.add("schema_registry.url", "", "does not parse as a URL; use http://host:port or https://host:port")
	case u.Scheme != "http" && u.Scheme != "https":
		ps.add("schema_registry.url", s.URL, "must start with http:// or https://, such as http://127.0.0.1:8081")
	case u.Host == "":
		ps.add("schema_registry.url", s.URL, "has no host; use http://host:port, such as http://127.0.0.1:8081")
	case u.User != nil:
		// The value is redacted in the message: it holds the credential.
		ps.add("schema_registry.url", "", "must not carry credentials; set schema_registry.username and schema_registry.password (or their SPILLWAY_SCHEMA_REGISTRY_* variables) instead")
	}
	if (s.Username == "") != (s.Password == "") {
		if s.Username == "" {
			ps.add("schema_registry.username", "", "required when schema_registry.password is set: basic auth takes both")
		} else {
			ps.add("schema_registry.password", "", "required when schema_registry.username is set: basic auth takes both (set SPILLWAY_SCHEMA_REGISTRY_PASSWORD to keep it out of the file)")
		}
	}
	ps.oneOf("schema_registry.decode", s.Decode, registryParts)
	t := s.TLS
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.add("schema_registry.tls.key_file", "", "required when schema_registry.tls.cert_file is set: a client certificate needs its private key")
	case t.KeyFile != "" && t.CertFile == "":
		ps.add("schema_registry.tls.cert_file", "", "required when schema_registry.tls.key_file is set: a private key needs its client certificate")
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
			ps.add(fl.key, fl.path, "is set but schema_registry.url is not https://; use an https URL to use TLS")
		}
		switch fi, err := os.Stat(fl.path); {
		case errors.Is(err, fs.ErrNotExist):
			ps.add(fl.key, fl.path, "does not exist; give the path of a PEM file")
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			ps.add(fl.key, fl.path, "can't be read: %v", err)
		case fi.IsDir():
			ps.add(fl.key, fl.path, "is a directory; give the path of a PEM file")
		}
	}
}
