package main

import (
	"os"
	"path/filepath"
	"testing"
)

// An Iceberg table on Azure is refused at config time, by `config check`
// as by run (exit 2), naming the key, its value and what to do instead:
// Spillway's azblob:// storage and an abfs:// table location name one
// file differently, and Spillway does not translate them yet.
func TestIcebergAzureWarehouseRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, storage, warehouse, key string }{
		{"default warehouse", "azblob://cont", "", "storage.url"},
		{"abfs warehouse", "azblob://cont", "abfss://cont@acct.dfs.core.windows.net/out", "iceberg.catalog.warehouse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			yaml := `kafka: {brokers: ["127.0.0.1:9092"], group: g, topics: [events]}
storage: {url: "` + tc.storage + `", prefix: "out/"}
format: {type: parquet}
iceberg:
  table: "kafka.{{topic}}"
  catalog: {uri: /var/lib/spillway/catalog.db, warehouse: "` + tc.warehouse + `"}
`
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := cli(t, nil, "config", "check", path)
			wantCode(t, code, exitUsage, out, errOut)
			wantContains(t, "config check", errOut, tc.key+": ", "is an Azure location: Spillway can't commit Iceberg tables to Azure yet",
				"use s3://, gs:// or a local directory as storage.url")
		})
	}
}
