package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Access protects the endpoint. The zero value serves everything to
// anyone over plain HTTP.
type Access struct {
	// Token, when set, is required on /metrics, /status and the status
	// page, as "Authorization: Bearer <token>" (what Prometheus sends with
	// authorization.credentials) or as the password of basic auth, with
	// any user name (what a browser prompts for). /healthz and /readyz
	// stay open: the kubelet's probes send no header, and they tell
	// nothing but ok or why not.
	Token string
	// TLS, when set, serves HTTPS instead of HTTP.
	TLS *tls.Config
}

// LoadAccess builds an Access from admin's keys: a token given directly
// or in tokenFile (its surrounding white space trimmed, such as the
// newline of `echo`), and a server certificate and key (PEM), all read
// now. Errors name the key; they never show the token.
func LoadAccess(token, tokenFile, certFile, keyFile string) (Access, error) {
	a := Access{Token: token}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return Access{}, fmt.Errorf("admin.token_file: %w", err)
		}
		if a.Token = strings.TrimSpace(string(b)); a.Token == "" {
			return Access{}, fmt.Errorf("admin.token_file %s is empty; write the token in it", tokenFile)
		}
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return Access{}, fmt.Errorf("admin.tls.cert_file %s and admin.tls.key_file %s: %w", certFile, keyFile, err)
		}
		a.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return a, nil
}

// protect wraps h so that it answers 401 unless the request carries the
// token. Both sides are hashed before the comparison, so that its time
// tells neither the token's bytes nor its length.
func (a Access) protect(h http.Handler) http.Handler {
	if a.Token == "" {
		return h
	}
	want := sha256.Sum256([]byte(a.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := "", false
		if v, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
			got, ok = strings.TrimSpace(v), true
		} else if _, pass, found := r.BasicAuth(); found {
			got, ok = pass, true
		}
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			// Basic first: a browser prompts for it, and the page's
			// fetches of /status then carry it.
			w.Header().Add("WWW-Authenticate", `Basic realm="spillway", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="spillway"`)
			writeText(w, http.StatusUnauthorized, "unauthorized: send admin.token as a bearer token, or as the password of basic auth\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}
