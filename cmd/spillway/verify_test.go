package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/testkit"
)

// verifyConfig writes a config that reads the cluster and the storage
// directory dir.
func verifyConfig(t *testing.T, broker, dir string) string {
	t.Helper()
	yaml := fmt.Sprintf(`kafka: {brokers: [%q], group: verify-test, topics: [events]}
storage: {url: "file://%s"}
file: {max_records: 250, max_age: 1h}
admin: {listen: ""}
backpressure: {memory_limit: 128MiB}
`, broker, dir)
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// storedTree maps every file under dir, dot files included, to its
// contents.
func storedTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for p, data := range storedTree(t, src) {
		rel, err := filepath.Rel(src, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// verifyCLI runs `spillway verify` and checks that it left storage as it
// was.
func verifyCLI(t *testing.T, dir string, args ...string) (code int, out, errOut string) {
	t.Helper()
	before := storedTree(t, dir)
	code, out, errOut = cli(t, nil, append([]string{"verify"}, args...)...)
	if after := storedTree(t, dir); !maps.Equal(before, after) {
		t.Errorf("verify changed storage: %d files before, %d after", len(before), len(after))
	}
	return code, out, errOut
}

// TestVerify drains a topic, then runs `spillway verify` on that storage
// (exit 0), and on copies of it damaged in each way verify reports (exit
// 1, the file named).
func TestVerify(t *testing.T) {
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 2_000, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	end := testkit.EndOffsets(t, cl, "events")
	dir := t.TempDir()
	cfgPath := verifyConfig(t, cluster.Addrs()[0], dir)
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	drainConfig(t, cl, cfg, end)

	code, out, errOut := verifyCLI(t, dir, "--config", cfgPath)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "verify output", out, "events/0: ok", "events/1: ok", "2 partitions: storage is consistent with Kafka")

	code, out, errOut = verifyCLI(t, dir, "--config", cfgPath, "--json", "--deep")
	wantCode(t, code, exitOK, out, errOut)
	var rep struct {
		OK         bool   `json:"ok"`
		Cluster    string `json:"cluster_id"`
		Deep       bool   `json:"deep"`
		Partitions []struct {
			Partition int32      `json:"partition"`
			TopicID   string     `json:"topic_id"`
			Files     int64      `json:"files"`
			Records   int64      `json:"records"`
			Stored    [][2]int64 `json:"stored_ranges"`
			Gaps      [][2]int64 `json:"gaps"`
			Committed int64      `json:"committed_offset"`
			End       int64      `json:"end_offset"`
			Deep      struct {
				Records int64 `json:"records_read"`
			} `json:"deep"`
			Problems []any `json:"problems"`
		} `json:"partitions"`
		Problems []any `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out)
	}
	if !rep.OK || rep.Cluster == "" || !rep.Deep || len(rep.Partitions) != 2 || rep.Problems == nil || len(rep.Problems) != 0 {
		t.Fatalf("verify --json --deep:\n%s", out)
	}
	for _, p := range rep.Partitions {
		if p.Files != 4 || p.Records != 1000 || p.Deep.Records != 1000 || p.Committed != 1000 || p.End != 1000 ||
			fmt.Sprint(p.Stored) != "[[0 1000]]" || p.Gaps == nil || len(p.Gaps) != 0 || p.Problems == nil || p.TopicID == "" {
			t.Errorf("verify --json --deep, partition %d: %+v", p.Partition, p)
		}
	}

	entryKey := func(dir string, p, seq int) string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("_spillway/ledger/events/*/%d/000/000/000/%03d.json", p, seq)))
		if err != nil || len(m) != 1 {
			t.Fatalf("ledger entry %d of partition %d: %v, %v", seq, p, m, err)
		}
		rel, _ := filepath.Rel(dir, m[0])
		return filepath.ToSlash(rel)
	}
	write := func(dir, key string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, key), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(dir, key string) []byte {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, key))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	remove := func(dir, key string) {
		t.Helper()
		if err := os.Remove(filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		deep   bool
		damage func(dir string) (want []string)
	}{
		{"file deleted", false, func(dir string) []string {
			remove(dir, "events-1-500.jsonl")
			return []string{"events/1: INCONSISTENT", "gaps [500,750)", "file_missing: events-1-500.jsonl"}
		}},
		{"last file deleted", false, func(dir string) []string {
			remove(dir, "events-0-750.jsonl")
			return []string{"head_missing: events-0-750.jsonl", "gaps [750,1000)"}
		}},
		{"file truncated", false, func(dir string) []string {
			data := read(dir, "events-0-250.jsonl")
			write(dir, "events-0-250.jsonl", data[:len(data)-1])
			return []string{"size_mismatch: events-0-250.jsonl"}
		}},
		{"foreign file", false, func(dir string) []string {
			write(dir, "events-0-9000.jsonl.zst", []byte("random bytes"))
			return []string{"events/0: ok", "unknown_file: events-0-9000.jsonl.zst"}
		}},
		{"file copied under another name", false, func(dir string) []string {
			write(dir, "events-0-251.jsonl", read(dir, "events-0-250.jsonl"))
			return []string{"unknown_file: events-0-251.jsonl"}
		}},
		{"corrupt ledger entry", false, func(dir string) []string {
			key := entryKey(dir, 0, 2)
			write(dir, key, []byte(`{"version":1,"seq":"x"}`))
			return []string{"corrupt_entry: ledger entry " + key}
		}},
		{"duplicate file", false, func(dir string) []string {
			// Another file and ledger entry claiming offsets 250-499.
			var e ledger.Entry
			if err := json.Unmarshal(read(dir, entryKey(dir, 0, 3)), &e); err != nil {
				t.Fatal(err)
			}
			data := read(dir, "events-0-250.jsonl")
			write(dir, "events-0-250-again.jsonl", data)
			// Valid on its own (runs that overlap the entry's own state
			// before are a corrupt entry): a racing writer's older state.
			e.Seq, e.Before = 4, offsets.State{Next: 250}
			e.File = ledger.FileInfo{Key: "events-0-250-again.jsonl", Ranges: offsets.Ranges{{250, 500}}, Records: 250, Bytes: int64(len(data))}
			out, err := json.Marshal(&e)
			if err != nil {
				t.Fatal(err)
			}
			write(dir, strings.TrimSuffix(entryKey(dir, 0, 3), "003.json")+"004.json", out)
			return []string{"duplicates 250", "duplicate: 250 offsets of events-0-250-again.jsonl are also stored in events-0-250.jsonl"}
		}},
		{"record that can't be read", true, func(dir string) []string {
			data := read(dir, "events-1-250.jsonl")
			i := strings.Index(string(data), `"offset":`)
			data[i+len(`"offset"`)] = ';' // same size: only reading it back tells
			write(dir, "events-1-250.jsonl", data)
			return []string{"unreadable_record: events-1-250.jsonl holds records that can't be read: record 0"}
		}},
		{"record changed in place", true, func(dir string) []string {
			// One digit of a value, so every record still reads, with
			// its offset, and the size is the same: only the file's
			// checksum tells (issue #22, case 8).
			data := read(dir, "events-0-500.jsonl")
			i := strings.Index(string(data), `"i":`) + len(`"i":`)
			if data[i] == '1' {
				data[i] = '2'
			} else {
				data[i] = '1'
			}
			write(dir, "events-0-500.jsonl", data)
			return []string{"events/0: INCONSISTENT", "checksum_mismatch: events-0-500.jsonl has the size its ledger entry 2 records", "restore it from a backup"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyTree(t, dir)
			want := tc.damage(dir)
			cfgPath := verifyConfig(t, cluster.Addrs()[0], dir)
			args := []string{"--config", cfgPath}
			if tc.deep {
				// Without --deep, the damage is out of sight.
				code, out, errOut := verifyCLI(t, dir, args...)
				wantCode(t, code, exitOK, out, errOut)
				args = append(args, "--deep")
			}
			code, out, errOut := verifyCLI(t, dir, args...)
			wantCode(t, code, exitRuntime, out, errOut)
			wantContains(t, "verify output", out, append(want, "storage is NOT consistent with Kafka")...)
			wantContains(t, "verify stderr", errOut, "not consistent")
		})
	}

	// Entries written before file.crc32c verify as before, clean, and the
	// report says their bytes were not summed.
	t.Run("entries without checksum", func(t *testing.T) {
		dir := copyTree(t, dir)
		sum := regexp.MustCompile(`,"crc32c":"[0-9a-f]{8}"`)
		entries, err := filepath.Glob(filepath.Join(dir, "_spillway/ledger/events/*/*/000/000/000/*.json"))
		if err != nil || len(entries) != 8 {
			t.Fatalf("ledger entries %v, %v: want 8", entries, err)
		}
		for _, p := range entries {
			data := read(dir, strings.TrimPrefix(p, dir+"/"))
			old := sum.ReplaceAll(data, nil)
			if len(old) == len(data) {
				t.Fatalf("%s has no crc32c: %s", p, data)
			}
			write(dir, strings.TrimPrefix(p, dir+"/"), old)
		}
		code, out, errOut := verifyCLI(t, dir, "--config", verifyConfig(t, cluster.Addrs()[0], dir), "--deep")
		wantCode(t, code, exitOK, out, errOut)
		wantContains(t, "verify output", out, "events/0: ok", "events/1: ok", "not checked: 4 files", "their ledger entries have no checksum",
			"2 partitions: storage is consistent with Kafka")
	})

	// Last, since it moves the group's commit.
	t.Run("commit past the log end", func(t *testing.T) {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "events", Partition: 1, At: 1200, LeaderEpoch: -1})
		resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "verify-test", offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := verifyCLI(t, dir, "--config", cfgPath)
		wantCode(t, code, exitRuntime, out, errOut)
		wantContains(t, "verify output", out, "committed_past_end: the group committed 1200 in events/1, past the log end 1000",
			"committed_past_ledger", "gaps [1000,1200)")
	})
}
