package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spillway/spillway/internal/testkit/outside"
)

// TestIcebergExpireSnapshots drains a topic into a table six times (each
// graceful stop is one snapshot) with iceberg.expire_snapshots keeping
// the last 3 at any age: read as another engine reads it (sqlite3,
// python3, python3-avro, DuckDB), the table has 3 snapshots left and its
// current one holds every record once; each drain after the first
// resumed from a table whose older snapshots had expired; verify finds
// it clean.
func TestIcebergExpireSnapshots(t *testing.T) {
	t.Parallel()
	duck := outside.NewDuckDB(t)
	outside.PythonAvro(t)
	it := newIceTopic(t, iceSetup{group: "expire-test", iceberg: `expire_snapshots: {max_age: 0s, keep_last: 3}`})
	const drains, per = 6, 500 // per: 250 a partition, one full file each
	for d := range drains {
		it.produce(d*per, per)
		it.drain()
	}
	r := it.readIndependently(duck, "events")
	if r.snapshots != 3 {
		t.Errorf("%d snapshots after %d commits with keep_last 3, want 3", r.snapshots, drains)
	}
	wantEachOnce(t, r.values, drains*per)
	code, out, errOut := verifyCLI(t, it.dir, "--config", it.cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "storage is consistent with Kafka")
	if containsAny(out, "not yet in table", "orphan") {
		t.Errorf("verify after expiry reports entries not in the table or orphans:\n%s", out)
	}
}

// TestIcebergExpireConfigCheck: `config check` shows the expiry keys, and
// refuses bad values with exit 2, naming the key, the value and the fix.
func TestIcebergExpireConfigCheck(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, expire string) (int, string, string) {
		t.Helper()
		yaml := `kafka: {brokers: ["127.0.0.1:9092"], group: g, topics: [events]}
storage: {url: "file:///tmp/spillway-out"}
format: {type: parquet}
iceberg: {table: "kafka.{{topic}}", expire_snapshots: ` + expire + `}
`
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return cli(t, nil, "config", "check", path)
	}
	code, out, errOut := check(t, "{keep_last: 24}")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "config check", out, "expire_snapshots:", "enabled: true", "max_age: 120h0m0s", "keep_last: 24")

	code, out, errOut = check(t, "{max_age: -1h, keep_last: 0}")
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "config check", errOut, `iceberg.expire_snapshots.max_age: "-1h0m0s"`, "must not be negative",
		`iceberg.expire_snapshots.keep_last: "0"`, "must be at least 1")
}
