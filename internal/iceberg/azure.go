package iceberg

import (
	"errors"
	"net/url"
)

// errAzureTables is why an Azure warehouse is refused in the config.
// iceberg-go v0.7.0 reads and writes tables at Azure locations
// (abfs[s]:// and wasb[s]://, with the adls.* properties: see
// TestAzureWarehouse, against Azurite), but Spillway stores each data file
// under storage.url, azblob://container/key, and names it to the table by
// that URL and key: a table on Azure would have to name it
// abfs://container@account.dfs.core.windows.net/key, a mapping of
// locations, keys and credentials (the account from the connection
// string) that run, the commit loop and verify don't make yet.
var errAzureTables = errors.New("is an Azure location: Spillway can't commit Iceberg tables to Azure yet (its data files are stored under storage.url as azblob://container/key, and a table on Azure names them abfs://container@account.dfs.core.windows.net/key, which Spillway does not translate); for a table, use s3://, gs:// or a local directory as storage.url and leave iceberg.catalog.warehouse empty, or write plain files to Azure by leaving iceberg.table empty")

// azureWarehouse refuses an Azure warehouse for a run (errAzureTables).
func azureWarehouse(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil // warehouseLocation names it
	}
	switch u.Scheme {
	case "abfs", "abfss", "wasb", "wasbs", "azblob":
		return errAzureTables
	}
	return nil
}
