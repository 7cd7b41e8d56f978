package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// TestVerifyDeepTyped drains a topic into csv, avro and parquet files, and
// `verify --deep` reads every record back and checks its offset (exit 0);
// with one byte of an avro or parquet file flipped, it exits 1 and names
// the file and the first record it could not read.
func TestVerifyDeepTyped(t *testing.T) {
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 1_000, func(i int) *kgo.Record {
		return &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d,"pad":"%0200d"}`, i, i)}
	})
	end := testkit.EndOffsets(t, cl, "events")
	for _, typ := range []string{"csv", "avro", "parquet"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			group := "verify-" + typ
			yaml := fmt.Sprintf(`kafka: {brokers: [%q], group: %s, topics: [events]}
storage: {url: "file://%s"}
file: {max_records: 250, max_age: 1h}
format: {type: %s, compression: zstd}
admin: {listen: ""}
backpressure: {memory_limit: 128MiB}
`, cluster.Addrs()[0], group, dir, typ)
			cfgPath := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(cfgPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			drainConfig(t, cl, cfg, end)

			code, out, errOut := verifyCLI(t, dir, "--config", cfgPath, "--json", "--deep")
			wantCode(t, code, exitOK, out, errOut)
			var rep struct {
				Partitions []struct {
					Deep struct {
						Files      int64 `json:"files_read"`
						Records    int64 `json:"records_read"`
						NotChecked []any `json:"not_checked"`
					} `json:"deep"`
				} `json:"partitions"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("verify --json: %v\n%s", err, out)
			}
			if len(rep.Partitions) != 1 || rep.Partitions[0].Deep.Files != 4 || rep.Partitions[0].Deep.Records != 1000 || len(rep.Partitions[0].Deep.NotChecked) != 0 {
				t.Fatalf("verify --json --deep: want 4 files and 1000 records read, every offset checked:\n%s", out)
			}

			if typ == "csv" {
				return // a flipped byte may well be a valid row
			}
			// The second file, damaged in its middle; same size, so
			// only reading it back can tell.
			name := fmt.Sprintf("events-0-250.%s", typ)
			p := filepath.Join(dir, name)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0xff
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut = verifyCLI(t, dir, "--config", cfgPath, "--deep")
			wantCode(t, code, exitRuntime, out, errOut)
			wantContains(t, "verify --deep output", out, "unreadable_record", name)
			if !strings.Contains(out, "can't be read past record") {
				t.Errorf("verify --deep output does not say which record:\n%s", out)
			}
		})
	}
}
