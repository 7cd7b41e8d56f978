package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// restoreConfig is a config whose files restore can read back whole.
func restoreConfig(t *testing.T, broker, dir, typ, encoding string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spillway.yaml")
	y := fmt.Sprintf(`kafka:
  brokers: [%q]
  topics: [orders]
  group: restore-cli
storage:
  url: file://%s
format:
  type: %s
  compression: gzip
  value_encoding: %s
  fields: [key, value, offset, timestamp, headers]
file:
  max_records: 50
  max_age: 1h
backpressure:
  memory_limit: 128MiB
admin:
  listen: ""
`, broker, dir, typ, encoding)
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRestoreCommand drains a topic with `run`, then restores it with the
// command: --dry-run, the run itself (binary keys, tombstones, headers),
// and the usage errors, each exit 2 with what to fix.
func TestRestoreCommand(t *testing.T) {
	cluster := testkit.NewCluster(t, 2, "orders", "orders-restored", "small")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "orders", 200, func(i int) *kgo.Record {
		r := &kgo.Record{Partition: int32(i % 2), Key: []byte{0, byte(i), 0xff}, Value: fmt.Appendf(nil, "v%d", i)}
		if i%10 == 3 {
			r.Value = nil
		}
		if i%4 == 1 {
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte{0xfe}}, {Key: "h", Value: nil}}
		}
		return r
	})
	dir := t.TempDir()
	cfgPath := restoreConfig(t, cluster.Addrs()[0], dir, "jsonl", "base64")
	drain(t, cfgPath, nil, cl, "orders")

	code, out, errOut := cli(t, nil, "restore", "--config", cfgPath, "--to-topic", "orders-restored", "--dry-run")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "dry run", out, "orders/0 -> orders-restored/0: 2 files, offsets [0,100), 100 records", "orders/1 -> orders-restored/1", "nothing produced")

	code, out, errOut = cli(t, nil, "restore", "--config", cfgPath, "--to-topic", "orders-restored")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "stdout", out, "restored 200 records")
	wantContains(t, "stderr", errOut, "restore: 200/200 records read (100.0%)")
	if ends := testkit.EndOffsets(t, cl, "orders-restored"); ends[0] < 100 || ends[1] < 100 {
		t.Errorf("orders-restored ends at %v, want at least 100 records and a marker in each partition", ends)
	}
	// Again: the progress says all is there.
	code, out, errOut = cli(t, nil, "restore", "--config", cfgPath, "--to-topic", "orders-restored")
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "stdout", out, "restored 0 records", "0 read and skipped")

	for _, tc := range []struct {
		name string
		args []string
		cfg  string
		want []string
	}{
		{"no destination", nil, cfgPath, []string{"restore needs --to-topic DST"}},
		{"missing destination", []string{"--to-topic", "nope"}, cfgPath, []string{"destination topic nope does not exist"}},
		{"bad partitions", []string{"--to-topic", "orders-restored", "--partitions", "x"}, cfgPath, []string{`--partitions "x"`}},
		{"bad time", []string{"--to-topic", "orders-restored", "--from-time", "yesterday"}, cfgPath, []string{"--from-time", "RFC 3339"}},
		{"text values", []string{"--to-topic", "orders-restored"}, restoreConfig(t, cluster.Addrs()[0], dir, "jsonl", "none"), []string{"format.value_encoding", "base64"}},
		{"csv", []string{"--to-topic", "orders-restored"}, restoreConfig(t, cluster.Addrs()[0], dir, "csv", "base64"), []string{"format.type", "csv"}},
	} {
		code, out, errOut := cli(t, nil, append([]string{"restore", "--config", tc.cfg}, tc.args...)...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.name, code, exitUsage, out, errOut)
		}
		wantContains(t, tc.name, errOut, tc.want...)
	}

	// A destination with fewer partitions: exit 2, saying how many.
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders-one"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, nil, "restore", "--config", cfgPath, "--to-topic", "orders-one")
	if code != exitUsage || !strings.Contains(errOut, "orders-one has 1 partitions, and restore needs at least 2") {
		t.Errorf("small destination: exit %d\n%s%s", code, out, errOut)
	}
}
