package config

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// check validates admin's token and TLS keys: each file must be there, so
// that a typo fails `config check` rather than the start.
func (a *Admin) check(ps *problems) {
	if a.Token != "" && a.TokenFile != "" {
		ps.add("admin.token_file", a.TokenFile, "is set with admin.token; set one of them")
	}
	if a.Token != "" && strings.TrimSpace(a.Token) != a.Token {
		ps.add("admin.token", "", "has leading or trailing white space; remove it (clients send the token as it is)")
	}
	t := a.TLS
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.add("admin.tls.key_file", "", "required when admin.tls.cert_file is set: the server certificate needs its private key")
	case t.KeyFile != "" && t.CertFile == "":
		ps.add("admin.tls.cert_file", "", "required when admin.tls.key_file is set: a private key needs its certificate")
	}
	for _, f := range []struct{ key, path, what string }{
		{"admin.token_file", a.TokenFile, "a file that holds the token"},
		{"admin.tls.cert_file", t.CertFile, "a PEM file"},
		{"admin.tls.key_file", t.KeyFile, "a PEM file"},
	} {
		if f.path == "" {
			continue
		}
		if a.Listen == "" {
			ps.add(f.key, f.path, "is set but admin.listen is \"\" (the endpoint is off); unset it, or set admin.listen")
		}
		switch fi, err := os.Stat(f.path); {
		case errors.Is(err, fs.ErrNotExist):
			ps.add(f.key, f.path, "does not exist; give the path of %s", f.what)
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			ps.add(f.key, f.path, "can't be read: %v", err)
		case fi.IsDir():
			ps.add(f.key, f.path, "is a directory; give the path of %s", f.what)
		}
	}
	if a.Token != "" && a.Listen == "" {
		ps.add("admin.token", "", "is set but admin.listen is \"\" (the endpoint is off); unset it, or set admin.listen")
	}
}
