package admin

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/keycheck/keychecktest"
)

// TestOptionsValidate checks the section on its own, as config gathers it:
// every problem at once, each naming its key, and the token never shown.
// config's TestRejects covers the same checks through Load.
func TestOptionsValidate(t *testing.T) {
	const secret = "hunter2-S3cret"
	dir := t.TempDir()
	pem := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(pem, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		name string
		o    Options
		want []string
	}{
		{"default", Options{Listen: "127.0.0.1:8080"}, nil},
		{"off", Options{}, nil},
		{"https with a token", Options{Listen: ":0", Token: secret, TLS: TLS{CertFile: pem, KeyFile: pem}, StallTimeout: time.Minute}, nil},
		{"everything wrong at once", Options{Listen: "nohostport", Token: " " + secret, TokenFile: missing, TLS: TLS{CertFile: dir}, StallTimeout: 10 * time.Millisecond}, []string{
			`admin.listen: "nohostport" is not host:port; use host:port such as 127.0.0.1:8080 or :8080, or "" to disable the endpoint`,
			`admin.token_file: "` + missing + `" is set with admin.token; set one of them`,
			`admin.token: has leading or trailing white space; remove it (clients send the token as it is)`,
			`admin.tls.key_file: required when admin.tls.cert_file is set: the server certificate needs its private key`,
			`admin.token_file: "` + missing + `" does not exist; give the path of a file that holds the token`,
			`admin.tls.cert_file: "` + dir + `" is a directory; give the path of a PEM file`,
			`admin.stall_timeout: "10ms" is out of range; use a duration from 1s to 24h, or 0 to derive it from file.max_age and storage.max_retries`,
		}},
		{"endpoint off", Options{Token: secret, TLS: TLS{KeyFile: pem}, StallTimeout: 48 * time.Hour}, []string{
			`admin.tls.cert_file: required when admin.tls.key_file is set: a private key needs its certificate`,
			`admin.tls.key_file: "` + pem + `" is set but admin.listen is "" (the endpoint is off); unset it, or set admin.listen`,
			`admin.token: is set but admin.listen is "" (the endpoint is off); unset it, or set admin.listen`,
			`admin.stall_timeout: "48h0m0s" is out of range; use a duration from 1s to 24h, or 0 to derive it from file.max_age and storage.max_retries`,
		}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			keychecktest.Problems(t, tt.o.Validate(), tt.want, secret, "token")
		})
	}
}
