package admin

import (
	_ "embed"
	"net/http"
)

// statusPage is the live status page: one self-contained file (styles,
// script, no external resource) that polls /status, so that it works
// where the process has no way out to the internet, and the admin
// endpoint serves nothing but itself.
//
//go:embed status.html
var statusPage []byte

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Nothing from elsewhere, by construction and by policy.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; connect-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(statusPage)
}
