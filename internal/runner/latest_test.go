package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
	"github.com/spillway/spillway/internal/verify"
)

// TestLatestPerKey runs the one-object-per-key layout against a broker:
// every (partition, key) ends as one object holding its last record; a
// second run replaces what changed; and a replay from offset 0 (a lost
// commit, or a crash before it) writes the same objects again, byte for
// byte, which is what makes this layout's at-least-once delivery safe.
func TestLatestPerKey(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 4, "events")
	cl := cluster.Client(t)
	last := map[string]int{} // "p/key" -> i of its last record
	produce := func(from, n int) {
		testkit.Produce(t, cl, "events", n, func(j int) *kgo.Record {
			i := from + j
			p, k := int32(i%4), fmt.Sprintf("k/%d", i%37)
			last[fmt.Sprintf("%d/%s", p, k)] = i
			return &kgo.Record{Partition: p, Key: []byte(k), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
		})
	}
	produce(0, 2000)

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.File.NameTemplate = "{{topic}}/{{partition}}/{{key}}"
	cfg.Format.Compression = "gzip"
	cfg.Format.Fields = []string{"key", "value", "offset"}
	cfg.Kafka.Group = "latest"
	drain := func() map[string][]byte {
		t.Helper()
		_, stop := started(t, cfg)
		waitCommitted(t, cl, cfg.Kafka.Group, testkit.EndOffsets(t, cl, "events"))
		if err := stop(); err != nil {
			t.Fatalf("graceful stop: %v", err)
		}
		return checkLatest(t, dir, last)
	}
	first := drain()
	produce(2000, 100) // 100 of the 148 (partition, key) pairs
	second := drain()
	changed := 0
	for k, v := range second {
		if string(first[k]) != string(v) {
			changed++
		}
	}
	if changed == 0 || changed == len(second) {
		t.Fatalf("%d of %d objects changed with the second run; want some, not all", changed, len(second))
	}

	// Roll the group back to the start: every record is read again.
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	for p := range int32(4) {
		offs.Add(kadm.Offset{Topic: "events", Partition: p, At: 0, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(context.Background(), cfg.Kafka.Group, offs); err != nil {
		t.Fatal(err)
	}
	replayed := drain()
	if !maps.EqualFunc(second, replayed, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatal("a replay from offset 0 left other objects than the run before it")
	}

	// verify knows this layout keeps no ledger: the objects are all named
	// by the template, and the commits are at the log end.
	b, err := storage.Open(context.Background(), cfg.Storage.URL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	names, err := naming.NewNames(cfg.Storage.Prefix, cfg.File.NameTemplate, ".jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(context.Background(), b, adm, cfg.Kafka.Group, []string{"events"}, verify.Options{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	var files int64
	for _, p := range rep.Partitions {
		files += p.Files
	}
	if !rep.OK || files != int64(len(last)) {
		t.Fatalf("verify: ok %v, %d files (want %d), problems %+v", rep.OK, files, len(last), rep)
	}
}

// checkLatest reads every object and checks it holds exactly the last
// record of its partition and key. It returns the decompressed objects.
func checkLatest(t *testing.T, dir string, last map[string]int) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		got[filepath.ToSlash(rel)] = outside.Decompress(t, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(last) {
		t.Fatalf("%d objects, want one per partition and key: %d", len(got), len(last))
	}
	for pk, i := range last {
		p, k, _ := strings.Cut(pk, "/")
		name := fmt.Sprintf("events/%s/%s.jsonl.gz", p, strings.ReplaceAll(k, "/", "!2F"))
		var rec struct {
			Key    string          `json:"key"`
			Value  json.RawMessage `json:"value"`
			Offset int64           `json:"offset"`
		}
		data, ok := got[name]
		if !ok {
			t.Fatalf("no object %s", name)
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("%s: %v (%q)", name, err, data)
		}
		if rec.Key != k || string(rec.Value) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("%s holds key %q value %s, want %q and the last record i=%d", name, rec.Key, rec.Value, k, i)
		}
	}
	return got
}
