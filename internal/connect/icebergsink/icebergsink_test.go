package icebergsink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/connect"
	"github.com/spillway/spillway/internal/connect/connecttest"
	"github.com/spillway/spillway/internal/testkit"
)

// TestGolden imports each example and compares the YAML with the golden
// file beside it; the YAML must load and validate as `config check` does.
// connecttest.Golden asks for six examples, the count of the products
// with many connectors; this sink has one, so the loop is here.
func TestGolden(t *testing.T) {
	t.Parallel()
	ins, _ := filepath.Glob("testdata/*.json")
	props, _ := filepath.Glob("testdata/*.properties")
	ins = append(ins, props...)
	if len(ins) < 3 {
		t.Fatalf("only %d examples in testdata", len(ins))
	}
	for _, in := range ins {
		t.Run(filepath.Base(in), func(t *testing.T) {
			t.Parallel()
			res := importFile(t, in)
			golden := strings.TrimSuffix(in, filepath.Ext(in)) + ".yaml"
			if testkit.UpdateGolden() {
				if err := os.WriteFile(golden, res.YAML, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (write it with SPILLWAY_UPDATE_GOLDEN=1 go test -run TestGolden)", err)
			}
			if string(res.YAML) != string(want) {
				t.Errorf("YAML differs from %s (rerun with SPILLWAY_UPDATE_GOLDEN=1 and review the diff):\n%s", golden, res.YAML)
			}
			if _, err := config.LoadBytes(res.YAML, nil); err != nil {
				t.Errorf("the imported YAML is not a valid config: %v", err)
			}
		})
	}
}

func importFile(t *testing.T, in string) *connect.Result {
	t.Helper()
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := connect.Import(in, data, "", Sinks())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestWarnings: the mapped keys land on the right lines, secrets are
// named as environment variables, and every key that can't be mapped is
// listed in a comment naming it.
func TestWarnings(t *testing.T) {
	t.Parallel()
	connecttest.Warnings(t, Sinks(), []connecttest.Warning{{
		In:   "iceberg-rest.json",
		Want: []string{"kafka.connect.offsets.iceberg-control.connect-events-iceberg"},
		YAML: []string{
			"table: analytics.events", "type: rest", "uri: 'https://catalog.example:8181'", "commit_interval: '1m0s'",
			"partition_by: ['hour(timestamp)']", "SPILLWAY_ICEBERG_CATALOG_CREDENTIAL", "group: connect-events-iceberg",
			"url: 's3://lake'", "no control topic",
		},
		NotYAML: []string{"s3cr3t-client"},
	}, {
		In:   "iceberg-sqlite.properties",
		Want: []string{"day(created_at) becomes day(timestamp)"},
		YAML: []string{"type: sql", "uri: '/var/lib/iceberg/catalog.db'", "table: sales.orders", "commit_interval: '5m0s'", "evolve_schema: false"},
	}, {
		In: "iceberg-unmappable.properties",
		Want: []string{
			"names 2 tables", "bucket(16, id) can't be mapped", "iceberg.catalog.type=hive can't be mapped",
		},
		YAML: []string{
			"iceberg.tables=db.one,db.two: NOT SUPPORTED", "one Spillway config per table", "{{topic}}",
			"iceberg.tables.route-field=kind: NOT SUPPORTED",
			"bucket(16, id) is NOT SUPPORTED", "iceberg.tables.default-id-columns=id: NOT SUPPORTED",
			"iceberg.catalog.type=hive: NOT SUPPORTED",
			"iceberg.control.group-id-prefix=cg-: Spillway needs no control topic",
			"iceberg.control.commit.timeout-ms=30000: Spillway needs no control topic",
			"format.type=orc: NOT SUPPORTED: Spillway writes Parquet", "iceberg.catalog.uri=thrift://metastore:9083: the URI of a catalog",
			"partition_by: ['day(timestamp)']", "url: 's3://lake'",
		},
	}})
}
