package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/testkit/outside"
)

// TestIcebergDottedTopic: topic orders.v1 under iceberg.table
// kafka.{{topic}} is table kafka.orders_v1, and its files lie in that
// table's location, <warehouse>/kafka.db/orders_v1/data, not in an
// orders.v1 folder that the location check refused at start. The run
// commits, an independent reader finds every record once, and verify is
// clean.
func TestIcebergDottedTopic(t *testing.T) {
	t.Parallel()
	it := newIceTopic(t, iceSetup{group: "dotted-topic", topic: "orders.v1"})
	if tmpl := it.cfg.File.NameTemplate; !strings.HasPrefix(tmpl, "kafka.db/{{topic:dots=_}}/data/") {
		t.Errorf("effective file.name_template %q: want the table's folder first", tmpl)
	}
	it.produce(0, 1_000)
	it.drain()

	r := it.readIndependently(outside.NewDuckDB(t), "orders_v1")
	wantEachOnce(t, r.values, 1_000)
	if len(r.files) != 4 {
		t.Errorf("want 4 data files in the snapshot, got %v", r.files)
	}
	for _, f := range r.files {
		if !strings.HasPrefix(f, filepath.Join(it.dir, "kafka.db", "orders_v1", "data")+"/") || !strings.Contains(filepath.Base(f), "orders.v1-") {
			t.Errorf("data file %s: want it in kafka.db/orders_v1/data, named by its topic orders.v1", f)
		}
	}
	if _, err := os.Stat(filepath.Join(it.dir, "kafka.db", "orders.v1")); !os.IsNotExist(err) {
		t.Errorf("a kafka.db/orders.v1 folder exists (%v): the table's files must all be in its location", err)
	}

	code, out, errOut := verifyCLI(t, it.dir, "--config", it.cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "table kafka.orders_v1 (topic orders.v1): 4 data files in the current snapshot", "storage is consistent with Kafka")
}

// TestIcebergTopicsOneTableRefused: orders.v1 and orders_v1 are both
// table kafka.orders_v1, so `spillway run` refuses them at start (exit
// 2) naming both topics and the key; orders-v1 keeps its "-" and is a
// table of its own, so it and orders_v1 pass config check.
func TestIcebergTopicsOneTableRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := func(topics string) string {
		return writeFile(t, "c.yaml", `kafka: {brokers: ["127.0.0.1:9092"], topics: [`+topics+`]}
storage: {url: "file://`+dir+`"}
format: {type: parquet}
iceberg: {table: "kafka.{{topic}}"}
`)
	}
	code, out, errOut := cli(t, nil, "run", "--config", conf(`orders.v1, orders-v1, orders_v1`))
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "run's stderr", errOut, "kafka.topics", "orders.v1 and orders_v1", "table kafka.orders_v1")

	code, out, errOut = cli(t, nil, "config", "check", conf(`orders-v1, orders_v1`))
	wantCode(t, code, exitOK, out, errOut)
}
