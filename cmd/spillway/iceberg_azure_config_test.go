package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `config check` of a table on Azure: the account comes from the
// environment (here a connection string's AccountName, as with Azurite),
// the default warehouse is storage.url's container as a table names it
// (abfs://container@account.dfs.core.windows.net/prefix), a warehouse in
// another container is refused (the data files would be outside the
// table), and without any account storage.url is refused with what to
// set. The connection string's key is never printed. Not parallel: the
// account is read from the process environment (t.Setenv).
func TestIcebergAzureConfigCheck(t *testing.T) {
	const key = "c2VjcmV0LWF6dXJlLWtleS1mb3ItdGhlLXRlc3Q="
	conn := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + key + ";BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;"
	for _, v := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGEBLOB_CONNECTIONSTRING", "AZURE_STORAGE_CONNECTION_STRING"} {
		t.Setenv(v, "")
	}
	check := func(t *testing.T, warehouse string) (int, string, string) {
		t.Helper()
		yaml := `kafka: {brokers: ["127.0.0.1:9092"], group: g, topics: [events]}
storage: {url: "azblob://cont", prefix: "out/"}
format: {type: parquet}
iceberg:
  table: "kafka.{{topic}}"
  catalog: {uri: /var/lib/spillway/catalog.db, warehouse: "` + warehouse + `"}
`
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := cli(t, nil, "config", "check", path)
		if strings.Contains(out+errOut, key) {
			t.Errorf("config check printed the account key:\n%s\n%s", out, errOut)
		}
		return code, out, errOut
	}

	t.Run("no account", func(t *testing.T) {
		code, out, errOut := check(t, "")
		wantCode(t, code, exitUsage, out, errOut)
		wantContains(t, "config check", errOut, `storage.url: "azblob://cont"`, "no storage account is known",
			"set AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_CONNECTION_STRING with its AccountName")
	})

	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
	t.Run("default warehouse", func(t *testing.T) {
		code, out, errOut := check(t, "")
		wantCode(t, code, exitOK, out, errOut)
		// The table's layout under the prefix, which needs the derived
		// warehouse (config's TestIcebergAzureWarehouse checks its value).
		wantContains(t, "config check", out, "name_template: kafka.db/{{topic:dots=_}}/data/")
	})
	t.Run("same container", func(t *testing.T) {
		code, out, errOut := check(t, "abfs://cont@devstoreaccount1.dfs.core.windows.net/out/tables")
		wantCode(t, code, exitOK, out, errOut)
	})
	t.Run("another container", func(t *testing.T) {
		code, out, errOut := check(t, "abfs://other@devstoreaccount1.dfs.core.windows.net/out")
		wantCode(t, code, exitUsage, out, errOut)
		wantContains(t, "config check", errOut, "iceberg.catalog.warehouse: ", "puts the table outside where Spillway writes")
	})
}
