// Package azureenv reads the Azure storage credentials the environment
// offers, in the order gocloud's azblob opener takes them: an account with
// a key, then a SAS token, then a connection string, then the default
// Azure identity. Storage's Azure backend and an Iceberg table's Azure
// FileIO both take them from here, so the two never sign with different
// credentials.
package azureenv

import (
	"os"
	"strings"
)

// The environment variables gocloud's azblob opener reads (see
// gocloud.dev/blob/azureblob), named here for the messages that say which
// one to change.
const (
	Conn     = "AZURE_STORAGE_CONNECTION_STRING"
	ConnAlt  = "AZURE_STORAGEBLOB_CONNECTIONSTRING"
	Account  = "AZURE_STORAGE_ACCOUNT"
	Key      = "AZURE_STORAGE_KEY"
	SAS      = "AZURE_STORAGE_SAS_TOKEN"
	Domain   = "AZURE_STORAGE_DOMAIN"
	Protocol = "AZURE_STORAGE_PROTOCOL"
	Emulator = "AZURE_STORAGE_IS_LOCAL_EMULATOR"
)

// Creds is what the environment offers to sign Azure requests. Its values
// are credentials: never log them.
type Creds struct {
	Account, Key, SAS string
	// Conn is the connection string, and ConnVar the variable it came
	// from (Conn, or ConnAlt when Conn is unset).
	Conn, ConnVar string
}

// FromEnv reads Creds from the environment, at every call: a process
// that is given new credentials uses them at its next open.
func FromEnv() Creds { return From(os.Getenv) }

// From reads Creds as FromEnv does, from getenv instead of the process
// environment.
func From(getenv func(string) string) Creds {
	c := Creds{Account: getenv(Account), Key: getenv(Key), SAS: getenv(SAS), Conn: getenv(Conn), ConnVar: Conn}
	if c.Conn == "" {
		c.Conn, c.ConnVar = getenv(ConnAlt), ConnAlt
	}
	return c
}

// UseConn reports whether the connection string is the credential in
// use: an account with a key, or a SAS token, comes first.
func (c Creds) UseConn() bool {
	return c.Conn != "" && !(c.Account != "" && c.Key != "") && c.SAS == ""
}

// ConnField is one field (AccountName, AccountKey, BlobEndpoint, ...) of a
// connection string, the last one given, or "".
func ConnField(conn, name string) string {
	v := ""
	for part := range strings.SplitSeq(conn, ";") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(part), name+"="); ok {
			v = s
		}
	}
	return v
}
