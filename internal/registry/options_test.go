package registry

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spillway/spillway/internal/keycheck/keychecktest"
)

// TestOptionsValidate checks the section on its own, as config gathers it:
// every problem at once, each naming its key, and the password never shown.
// config's TestRejects covers the same checks through Load.
func TestOptionsValidate(t *testing.T) {
	const secret = "hunter2-S3cret"
	dir := t.TempDir()
	pem := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(pem, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name string
		o    Options
		want []string // "" for none
	}{
		{"none", Options{Decode: "value"}, nil},
		{"http", Options{URL: "http://registry:8081", Decode: "value"}, nil},
		{"https with everything", Options{URL: "https://registry:8081", Username: "key", Password: secret, Decode: "both",
			TLS: TLS{CAFile: pem, CertFile: pem, KeyFile: pem}}, nil},
		{"keys without a URL", Options{Username: "u", Password: secret, TLS: TLS{CertFile: pem}}, []string{
			`schema_registry.username: "u" is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081`,
			`schema_registry.tls.cert_file: "` + pem + `" is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081`,
			`schema_registry.password: is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081`,
		}},
		{"credentials in the URL", Options{URL: "http://u:" + secret + "@registry:8081", Password: secret, Decode: "value"}, []string{
			`schema_registry.url: must not carry credentials; set schema_registry.username and schema_registry.password (or their SPILLWAY_SCHEMA_REGISTRY_* variables) instead`,
			`schema_registry.username: required when schema_registry.password is set: basic auth takes both`,
		}},
		{"everything wrong at once", Options{URL: "ftp://x", Username: "me", Decode: "values", TLS: TLS{CAFile: missing, KeyFile: dir}}, []string{
			`schema_registry.url: "ftp://x" must start with http:// or https://, such as http://127.0.0.1:8081`,
			`schema_registry.password: required when schema_registry.username is set: basic auth takes both (set SPILLWAY_SCHEMA_REGISTRY_PASSWORD to keep it out of the file)`,
			`schema_registry.decode: "values" is not valid; use value, key or both`,
			`schema_registry.tls.cert_file: required when schema_registry.tls.key_file is set: a private key needs its client certificate`,
			`schema_registry.tls.ca_file: "` + missing + `" is set but schema_registry.url is not https://; use an https URL to use TLS`,
			`schema_registry.tls.ca_file: "` + missing + `" does not exist; give the path of a PEM file`,
			`schema_registry.tls.key_file: "` + dir + `" is set but schema_registry.url is not https://; use an https URL to use TLS`,
			`schema_registry.tls.key_file: "` + dir + `" is a directory; give the path of a PEM file`,
		}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			keychecktest.Problems(t, tt.o.Validate(), tt.want, secret, "password")
		})
	}
}

func TestOptionsNormalize(t *testing.T) {
	for in, want := range map[string]string{"BOTH": "both", " Key ": "key", "value": "value", "values": "values", "": ""} {
		o := Options{Decode: in}
		o.Normalize()
		if o.Decode != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, o.Decode, want)
		}
	}
	if !(Options{URL: "http://r:1", Decode: "both"}).DecodeKeys() || (Options{Decode: "both"}).DecodeKeys() {
		t.Error("DecodeKeys: want true with a URL and decode both, false without a URL")
	}
}
