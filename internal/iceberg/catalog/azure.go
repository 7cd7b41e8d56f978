package catalog

import (
	"errors"
	"net/url"
	"os"
	"strings"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/spillway/spillway/internal/azureenv"
	"github.com/spillway/spillway/internal/naming/tablepath"
)

// Azure. Spillway's storage stores a file at azblob://container/key and a
// table names it abfs://container@account.dfs.core.windows.net/key
// (tablepath.AzureBase). The account and the credentials come from the
// environment variables gocloud's azblob opener reads, taken in the same
// order as internal/storage takes them (package azureenv), and become
// iceberg-go's adls.* FileIO properties. They are never logged: the
// catalog scrubs their values from its errors (Open).

// azureAccount is the storage account storage.url's container is in:
// its storage_account= parameter, else the connection string's
// AccountName when storage signs with it, else AZURE_STORAGE_ACCOUNT.
func azureAccount(u *url.URL) string {
	if a := u.Query().Get("storage_account"); a != "" {
		return a
	}
	e := azureenv.FromEnv()
	if e.UseConn() {
		return azureenv.ConnField(e.Conn, "AccountName")
	}
	return e.Account
}

// TableBase is the root under which a table names the keys of
// storageURL: storageURL without its query (s3's region, ...), or, for an
// azblob:// container, its abfs:// location (tablepath.AzureBase). No
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
		base, _, err := tablepath.AzureBase(storageURL, account)
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
	e := azureenv.FromEnv()
	p := map[string]string{}
	if v := os.Getenv(azureenv.Domain); v != "" {
		p[iceio.ADLSEndpoint] = v
	}
	if v := os.Getenv(azureenv.Protocol); v != "" {
		p[iceio.ADLSProtocol] = v
	}
	switch {
	case e.Account == account && e.Key != "":
		p[iceio.ADLSSharedKeyAccountName] = account
		p[iceio.ADLSSharedKeyAccountKey] = e.Key
	case e.Account == account && e.SAS != "":
		p[iceio.ADLSSasTokenPrefix+host] = e.SAS
	case e.UseConn() && azureenv.ConnField(e.Conn, "AccountName") == account:
		p[iceio.ADLSConnectionStringPrefix+account] = e.Conn
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
				if s := azureenv.ConnField(v, f); len(s) >= 4 {
					out = append(out, s)
				}
			}
		case SecretProp(k):
			out = append(out, v)
		}
	}
	return out
}
