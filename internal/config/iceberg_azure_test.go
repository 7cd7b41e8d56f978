package config

import "testing"

// TestIcebergAzureWarehouse: with azblob:// storage, the default
// warehouse that opens the catalog (IcebergWarehouse) and the one the
// layout is checked against (Warehouse) are both the container as a
// table names it, abfs://container@account.dfs.core.windows.net/prefix,
// the account from the environment: storage_account= first, then
// AZURE_STORAGE_ACCOUNT, or a connection string's AccountName when
// storage signs with it. Not parallel: t.Setenv.
func TestIcebergAzureWarehouse(t *testing.T) {
	for _, v := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGEBLOB_CONNECTIONSTRING", "AZURE_STORAGE_CONNECTION_STRING"} {
		t.Setenv(v, "")
	}
	load := func(url string) *Config {
		t.Helper()
		yaml := "format: {type: parquet}\nstorage: {url: \"" + url + "\", prefix: \"out/\"}\niceberg: {table: kafka.events, catalog: {uri: /tmp/catalog.db}}\n"
		c, err := LoadBytes([]byte(yaml), topicsEnv)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		return c
	}
	want := func(c *Config, w string) {
		t.Helper()
		if got := c.IcebergWarehouse(); got != w {
			t.Errorf("%s: IcebergWarehouse = %q, want %q", c.Storage.URL, got, w)
		}
		if got := c.Warehouse(); got != w {
			t.Errorf("%s: Warehouse = %q, want %q", c.Storage.URL, got, w)
		}
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=fromconn;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/fromconn;")
	want(load("azblob://cont"), "abfs://cont@fromconn.dfs.core.windows.net/out/")
	want(load("azblob://cont?protocol=http&storage_account=fromurl"), "abfs://cont@fromurl.dfs.core.windows.net/out/")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "fromenv")
	t.Setenv("AZURE_STORAGE_KEY", "a2V5")
	want(load("azblob://cont"), "abfs://cont@fromenv.dfs.core.windows.net/out/")
}
