package admin

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/hostport"
	"github.com/spillway/spillway/internal/keycheck"
)

// Options is the admin section of the config: the HTTP endpoint for
// metrics and health. The koanf tags are the public key names
// (docs/config.md lists them): add keys, never rename them.
type Options struct {
	Listen string `koanf:"listen"`
	// Token, when set, is required as a bearer token (or as the password
	// of basic auth) on /metrics, /status and the status page; /healthz
	// and /readyz stay open for the kubelet's probes. TokenFile names a
	// file that holds it instead, read at start.
	Token     string `koanf:"token"` // secret
	TokenFile string `koanf:"token_file"`
	TLS       TLS    `koanf:"tls"`
	// StallTimeout is how long the pipeline may make no progress (no
	// record written, file stored or offset committed) while it lags,
	// and not because the byte budget holds it back, before /healthz
	// fails. 0 derives it: file.max_age plus the storage retries' longest
	// wait plus a minute, so a file waiting out its age or a request
	// being retried is not taken for a stall.
	StallTimeout time.Duration `koanf:"stall_timeout"`
}

// TLS serves the admin endpoint over HTTPS with this certificate and
// key (PEM files, read at start); both or neither.
type TLS struct {
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// Validate reports every problem with the section as a *keycheck.Error, or
// nil: each names its admin key, the value when it is not secret, and the
// fix. Each file must be there, so that a typo fails `config check` rather
// than the start.
func (a *Options) Validate() error {
	var ps keycheck.List
	if a.Listen != "" {
		if err := hostport.Listen(a.Listen); err != nil {
			ps.Add("admin.listen", a.Listen, "%v; use host:port such as 127.0.0.1:8080 or :8080, or \"\" to disable the endpoint", err)
		}
	}
	if a.Token != "" && a.TokenFile != "" {
		ps.Add("admin.token_file", a.TokenFile, "is set with admin.token; set one of them")
	}
	if a.Token != "" && strings.TrimSpace(a.Token) != a.Token {
		ps.Add("admin.token", "", "has leading or trailing white space; remove it (clients send the token as it is)")
	}
	t := a.TLS
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.Add("admin.tls.key_file", "", "required when admin.tls.cert_file is set: the server certificate needs its private key")
	case t.KeyFile != "" && t.CertFile == "":
		ps.Add("admin.tls.cert_file", "", "required when admin.tls.key_file is set: a private key needs its certificate")
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
			ps.Add(f.key, f.path, "is set but admin.listen is \"\" (the endpoint is off); unset it, or set admin.listen")
		}
		switch fi, err := os.Stat(f.path); {
		case errors.Is(err, fs.ErrNotExist):
			ps.Add(f.key, f.path, "does not exist; give the path of %s", f.what)
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			ps.Add(f.key, f.path, "can't be read: %v", err)
		case fi.IsDir():
			ps.Add(f.key, f.path, "is a directory; give the path of %s", f.what)
		}
	}
	if a.Token != "" && a.Listen == "" {
		ps.Add("admin.token", "", "is set but admin.listen is \"\" (the endpoint is off); unset it, or set admin.listen")
	}
	if t := a.StallTimeout; t != 0 && (t < time.Second || t > 24*time.Hour) {
		ps.Add("admin.stall_timeout", t.String(), "is out of range; use a duration from 1s to 24h, or 0 to derive it from file.max_age and storage.max_retries")
	}
	return ps.Err()
}
