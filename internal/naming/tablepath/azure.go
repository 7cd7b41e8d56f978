package tablepath

import (
	"fmt"
	"net/url"
	"strings"
)

// Azure tables. Spillway's storage names an Azure container
// azblob://container (gocloud's scheme) and a file by its key in it; an
// Iceberg table names the same file
// abfs://container@account.dfs.core.windows.net/key, the scheme every
// Iceberg engine (and iceberg-go's Azure FileIO) reads. AzureBase is
// the one translation between them: the config's warehouse and location
// check, the commit loop's file locations and verify's keys all go
// through it (by way of TableBase), so that a key and its location can't
// disagree.

// AzureBase is the Iceberg location of the root of storageURL's
// container (abfs://container@account.dfs.core.windows.net, no trailing
// "/"), given the storage account; ok is false when storageURL is not an
// azblob:// URL. Its query (gocloud's domain=, protocol=, ...) is left
// out: an Iceberg location is a plain URI, and the endpoint goes to the
// FileIO as properties.
func AzureBase(storageURL, account string) (base string, ok bool, err error) {
	u, err := url.Parse(storageURL)
	if err != nil || u.Scheme != "azblob" {
		return "", false, nil
	}
	if u.Host == "" {
		return "", true, fmt.Errorf("storage.url %q names no container; write azblob://container", storageURL)
	}
	if account == "" {
		return "", true, fmt.Errorf("storage.url %s: no storage account is known to name the table's abfs:// location; set AZURE_STORAGE_ACCOUNT, or AZURE_STORAGE_CONNECTION_STRING with AccountName", storageURL)
	}
	if strings.ContainsAny(account, "/@:?#") {
		return "", true, fmt.Errorf("the storage account %q is not an account name", account)
	}
	return "abfs://" + u.Host + "@" + account + ".dfs.core.windows.net", true, nil
}
