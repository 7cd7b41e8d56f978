package admin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startWith is start with an Access; scheme is http or https.
func startWith(t *testing.T, src Source, a Access) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewWithListener(ln, src, nil).WithAccess(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	scheme := "http://"
	if a.TLS != nil {
		scheme = "https://"
	}
	return scheme + s.Addr()
}

// do sends a GET with header h (name: value) through c.
func do(t *testing.T, c *http.Client, url string, h ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestTokenProtectsAllButProbes: with a token, /metrics, /status and the
// page answer 401 without it (with a challenge a browser prompts for) or
// with a wrong one, and 200 with it as a bearer token or as basic auth's
// password; /healthz and /readyz answer without it, as the kubelet's
// probes need.
func TestTokenProtectsAllButProbes(t *testing.T) {
	src := &fakeSource{st: sampleStatus()}
	src.set(func(s *Status) { s.Ready = true })
	const token = "s3cret-admin-token"
	base := startWith(t, src, Access{Token: token})
	basic := func(user, pass string) string {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(user, pass)
		return req.Header.Get("Authorization")
	}
	for _, path := range []string{"/metrics", "/status", "/"} {
		for _, c := range []struct {
			what string
			h    []string
			want int
		}{
			{"no token", nil, http.StatusUnauthorized},
			{"wrong token", []string{"Authorization", "Bearer " + token + "x"}, http.StatusUnauthorized},
			{"a prefix of the token", []string{"Authorization", "Bearer " + token[:5]}, http.StatusUnauthorized},
			{"empty bearer", []string{"Authorization", "Bearer "}, http.StatusUnauthorized},
			{"token under another scheme", []string{"Authorization", "Token " + token}, http.StatusUnauthorized},
			{"wrong basic password", []string{"Authorization", basic("u", "nope")}, http.StatusUnauthorized},
			{"bearer", []string{"Authorization", "Bearer " + token}, http.StatusOK},
			{"basic, any user", []string{"Authorization", basic("anyone", token)}, http.StatusOK},
		} {
			if got := do(t, client, base+path, c.h...); got != c.want {
				t.Errorf("%s with %s: %d, want %d", path, c.what, got, c.want)
			}
		}
	}
	resp, err := client.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ch := resp.Header.Values("WWW-Authenticate"); len(ch) == 0 || !strings.HasPrefix(ch[0], "Basic ") {
		t.Errorf("401 challenges %q, want Basic first (a browser prompts for it)", ch)
	}
	if strings.Contains(string(b), token) {
		t.Errorf("the 401 shows the token: %s", b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if got := do(t, client, base+path); got != http.StatusOK {
			t.Errorf("%s without a token: %d, want 200 (probes send none)", path, got)
		}
	}
}

// TestNoTokenIsOpen: without a token, nothing asks for one.
func TestNoTokenIsOpen(t *testing.T) {
	base := startWith(t, &fakeSource{st: sampleStatus()}, Access{})
	for _, path := range []string{"/metrics", "/status", "/"} {
		if got := do(t, client, base+path); got != http.StatusOK {
			t.Errorf("%s: %d, want 200", path, got)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spillway-admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestTLSAndTokenFile: admin.tls serves HTTPS with the given certificate
// (a client trusting it gets through; plain HTTP does not), and
// admin.token_file's token, trimmed of its newline, is the one required.
func TestTLSAndTokenFile(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := LoadAccess("", tokenFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	base := startWith(t, &fakeSource{st: sampleStatus()}, a)
	tc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	if got := do(t, tc, base+"/metrics", "Authorization", "Bearer from-a-file"); got != http.StatusOK {
		t.Errorf("https /metrics with the file's token: %d, want 200", got)
	}
	if got := do(t, tc, base+"/metrics"); got != http.StatusUnauthorized {
		t.Errorf("https /metrics without a token: %d, want 401", got)
	}
	if got := do(t, tc, base+"/healthz"); got != http.StatusOK {
		t.Errorf("https /healthz: %d, want 200", got)
	}
	plain := "http://" + strings.TrimPrefix(base, "https://") + "/healthz"
	if resp, err := client.Get(plain); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the TLS endpoint answered 200")
		}
	}
}

// TestLoadAccessErrors: what can't be loaded names its key, and never
// shows the token.
func TestLoadAccessErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(notPEM, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what                                string
		token, tokenFile, certFile, keyFile string
		want                                string
	}{
		{"empty token file", "", empty, "", "", "admin.token_file"},
		{"missing token file", "", filepath.Join(dir, "nope"), "", "", "admin.token_file"},
		{"certificate not PEM", "tok-secret", "", notPEM, notPEM, "admin.tls.cert_file"},
	} {
		_, err := LoadAccess(c.token, c.tokenFile, c.certFile, c.keyFile)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.what, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "tok-secret") {
			t.Errorf("%s: the error shows the token: %v", c.what, err)
		}
	}
}
