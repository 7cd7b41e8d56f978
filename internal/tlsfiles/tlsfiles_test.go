package tlsfiles_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/tlsfiles"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A CA file replaces the system's roots: a server whose certificate the
// system trusts, but no CA in the file signed, is refused. The schema
// registry's CA file once added to the system's roots while Kafka's
// replaced them. The system's roots are the test's own (SSL_CERT_FILE,
// read once per process at the first use of the system pool, so this is
// the package's only test that dials).
func TestCAFileReplacesSystemRoots(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	system := filepath.Join(dir, "system.pem")
	writePEM(t, system, srv.Certificate().Raw)
	t.Setenv("SSL_CERT_FILE", system)
	t.Setenv("SSL_CERT_DIR", dir)

	dial := func(tc *tls.Config) error {
		tc.ServerName = "example.com" // a name httptest's certificate holds
		d := tls.Dialer{Config: tc}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	// Without a CA file the system's roots are used, and trust the server.
	tc, err := tlsfiles.Config("kafka.tls", tlsfiles.Files{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(tc); err != nil {
		t.Fatalf("without a CA file: %v; want the system's roots (the test's) to trust the server", err)
	}

	other := filepath.Join(dir, "other-ca.pem")
	writePEM(t, other, newCA(t))
	tc, err = tlsfiles.Config("kafka.tls", tlsfiles.Files{CAFile: other})
	if err != nil {
		t.Fatal(err)
	}
	err = dial(tc)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("with a CA file that did not sign the server's certificate: %v; want it refused as signed by an unknown authority: the CA file must replace the system's roots, not add to them", err)
	}
}

func TestConfigNamesTheKey(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := tlsfiles.Config("schema_registry.tls", tlsfiles.Files{CAFile: bad})
	if err == nil || !strings.Contains(err.Error(), "schema_registry.tls.ca_file") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Config = %v, want an error naming schema_registry.tls.ca_file and the file", err)
	}
}

// newCA is a self-signed CA certificate, DER.
func newCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "other test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, path string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
