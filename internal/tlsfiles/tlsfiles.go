// Package tlsfiles builds the TLS client configs of the Kafka brokers and
// the schema registry from their PEM files, by one rule.
//
// A CA file replaces the system's roots: only the CAs it holds are
// trusted. That is what Kafka's own clients and Confluent's do with a
// truststore, and what a CA file is for: a private CA names who may
// speak for the service, and adding it to the public roots would also
// trust any certificate a public CA issues for that name.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Files are the PEM files of one TLS client, each optional.
type Files struct {
	// CAFile holds the CAs to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a client certificate for mutual TLS.
	CertFile, KeyFile string
}

// Config reads the files into a client config. key is the files' config
// section (kafka.tls), which errors name.
func Config(key string, f Files) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate; give a file of PEM CA certificates", key, f.CAFile)
		}
		tc.RootCAs = pool
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.cert_file/key_file: %w", key, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
