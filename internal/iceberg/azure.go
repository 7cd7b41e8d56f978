package iceberg

import (
	"errors"
	"net/url"
	"os"
	"strings"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/spillway/spillway/internal/naming"
)

// Azure. Spillway's storage stores a file at azblob://container/key and a
// table names it abfs://container@account.dfs.core.windows.net/key
// (naming.AzureTableBase). The account and the credentials come from the
// environment variables gocloud's azblob opener reads, taken in the same
// order as internal/storage takes them (an account with a key, then a SAS
// token, then a connection string, then the default identity), and become
// iceberg-go's adls.* FileIO properties. They are never logged: the
// catalog scrubs their values from its errors (Open).

// The environment variables, as internal/storage names them.
const (
	envAzureConn     = "AZURE_STORAGE_CONNECTION_STRING"
	envAzureConnAlt  = "AZURE_STORAGEBLOB_CONNECTIONSTRING"
	envAzureAccount  = "AZURE_STORAGE_ACCOUNT"
	envAzureKey      = "AZURE_STORAGE_KEY"
	envAzureSAS      = "AZURE_STORAGE_SAS_TOKEN"
	envAzureDomain   = "AZURE_STORAGE_DOMAIN"
	envAzureProtocol = "AZURE_STORAGE_PROTOCOL"
)

// azureEnv is the Azure credentials the environment offers.
type azureEnv struct{ account, key, sas, conn string }

func readAzureEnv() azureEnv {
	e := azureEnv{account: os.Getenv(envAzureAccount), key: os.Getenv(envAzureKey), sas: os.Getenv(envAzureSAS), conn: os.Getenv(envAzureConn)}
	if e.conn == "" {
		e.conn = os.Getenv(envAzureConnAlt)
	}
	return e
}

// useConn reports whether storage signs with the connection string.
func (e azureEnv) useConn() bool {
	return e.conn != "" && !(e.account != "" && e.key != "") && e.sas == ""
}

// connField is one field (AccountName, AccountKey, ...) of a connection
// string, or "".
func connField(conn, name string) string {
	v := ""
	for part := range strings.SplitSeq(conn, ";") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(part), name+"="); ok {
			v = s
		}
	}
	return v
}

// azureAccount is the storage account storage.url's container is in:
// its storage_account= parameter, else the connection string's
// AccountName when storage signs with it, else AZURE_STORAGE_ACCOUNT.
func azureAccount(u *url.URL) string {
	if a := u.Query().Get("storage_account"); a != "" {
		return a
	}
	e := readAzureEnv()
	if e.useConn() {
		return connField(e.conn, "AccountName")
	}
	return e.account
}

// TableBase is the root under which a table names the keys of
// storageURL: storageURL without its query (s3's region, ...), or, for an
// azblob:// container, its abfs:// location (naming.AzureTableBase). No
// trailing "/".
func TableBase(storageURL string) (string, error) {
	u, err := url.Parse(storageURL)
	if err != nil {
		return strings.TrimSuffix(storageURL, "/"), nil //nolint:nilerr // the config names an unparsable storage.url
	}
	if u.Scheme == "azblob" {
		account := azureAccount(u)
		if account == "" && u.Host != "" {
			return "", errors.New("is an Azure container, which a table names abfs://container@account.dfs.core.windows.net, but no storage account is known; set AZURE_STORAGE_ACCOUNT (with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN), or AZURE_STORAGE_CONNECTION_STRING with its AccountName")
		}
		base, _, err := naming.AzureTableBase(storageURL, account)
		return base, err
	}
	u.RawQuery = ""
	return strings.TrimSuffix(u.String(), "/"), nil
}

// azureProps are the adls.* properties that reach the account of an
// Azure location (host account.dfs.core.windows.net, or the blob host)
// with the environment's credentials, when they are that account's.
func azureProps(host string) map[string]string {
	account, _, _ := strings.Cut(host, ".")
	e := readAzureEnv()
	p := map[string]string{}
	if v := os.Getenv(envAzureDomain); v != "" {
		p[iceio.ADLSEndpoint] = v
	}
	if v := os.Getenv(envAzureProtocol); v != "" {
		p[iceio.ADLSProtocol] = v
	}
	switch {
	case e.account == account && e.key != "":
		p[iceio.ADLSSharedKeyAccountName] = account
		p[iceio.ADLSSharedKeyAccountKey] = e.key
	case e.account == account && e.sas != "":
		p[iceio.ADLSSasTokenPrefix+host] = e.sas
	case e.useConn() && connField(e.conn, "AccountName") == account:
		p[iceio.ADLSConnectionStringPrefix+account] = e.conn
	}
	return p
}

// azureSecrets are the credential values among props, for scrub: a
// connection string, and the key or token inside it.
func azureSecrets(props map[string]string) []string {
	var out []string
	for k, v := range props {
		if len(v) < 4 {
			continue
		}
		switch {
		case strings.HasPrefix(k, iceio.ADLSConnectionStringPrefix):
			out = append(out, v)
			for _, f := range []string{"AccountKey", "SharedAccessSignature"} {
				if s := connField(v, f); len(s) >= 4 {
					out = append(out, s)
				}
			}
		case secretProp(k):
			out = append(out, v)
		}
	}
	return out
}
