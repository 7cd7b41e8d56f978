package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

const (
	iceWidePartitions = 300
	iceWideDays       = 4
	iceWideRecords    = 60_000 // 240 MB of values: past the cgroup's limit, buffered
	iceWideValue      = 4000
	iceWideGroup      = "ice-wide"
)

// TestIcebergManyPartitionsUnderCgroup is the case that takes Apache
// Iceberg's Connect sink out of memory: many partitions × day partitions.
// 300 partitions, each interleaving events of 4 days, so that 1,200
// Parquet files are open at once under partition_by: day(timestamp), are
// drained by one `spillway run` inside a 256 MiB memory cgroup (memory_limit:
// auto) into a table of the SQL catalog. It must not be OOM-killed, and the
// table's current snapshot, read independently (the catalog's SQLite row,
// the metadata JSON, python3-avro for the manifests, DuckDB for the data
// files), holds every offset exactly once, in all 1,200 (partition, day)
// pairs, with no delete file.
//
// It can fail: with SPILLWAY_BACKPRESSURE_MEMORY_LIMIT=2GiB in the test's
// environment (a budget the cgroup can't hold) the open files buffer the
// 240 MB of values and spillway is OOM-killed.
func TestIcebergManyPartitionsUnderCgroup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("drains 240 MB into 1,200 open files inside a memory cgroup; skipped with -short")
	}
	outside.PythonAvro(t)
	duck := outside.NewDuckDB(t)
	cg := newMemCgroup(t, oomLimit)
	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, iceWidePartitions, iceTopic)
	admin := b.Client(t)

	// The backlog waits in the broker before spillway starts, so that
	// every partition has all its days at once.
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := <-produceDays(ctx, b.Client(t, kgo.ProducerBatchMaxBytes(1<<20)), iceTopic,
		iceWidePartitions, 0, iceWideRecords, 10_000, iceWideValue, iceWideDays, false); err != nil {
		t.Fatal(err)
	}
	ends := testkit.EndOffsets(t, admin, iceTopic)
	t.Logf("backlog: %d records of %d bytes in %d partitions × %d days, produced in %s",
		iceWideRecords, iceWideValue, iceWidePartitions, iceWideDays, time.Since(start).Round(100*time.Millisecond))

	config := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  topics: [%s]
  start_offset: earliest
storage:
  url: "file://%s"
file:
  max_bytes: 16MiB
  max_age: 5s
  timestamp_source: event
  timezone: UTC
format:
  type: parquet
  compression: zstd
iceberg:
  table: "kafka.{{topic}}"
  partition_by: ["day(timestamp)"]
  commit_interval: 1m
backpressure:
  memory_limit: auto
admin:
  listen: ""
shutdown:
  timeout: 60s
`, b.Addr, iceWideGroup, iceTopic, out)
	sp := startSpillway(t, config, cg)
	start = time.Now()
	deadline := start.Add(5 * time.Minute)
	for {
		if _, complete := drainProgress(testkit.CommittedOffsets(t, admin, iceWideGroup, iceTopic), ends); complete == len(ends) {
			break
		}
		select {
		case <-sp.Done():
			hwm, anon := sp.Peaks()
			t.Fatalf("spillway exited before draining: %s; OOM kills in its cgroup: %d; cgroup peak %s, anon peak %s, process peak RSS %s",
				describeExit(sp.Wait(t, 0)), cg.OOMKills(), mib(cg.Peak()), mib(anon), mib(hwm))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained within 5m")
		}
	}
	drained := time.Since(start)
	sp.WaitRunning(t)
	sp.Signal(t, syscall.SIGTERM)
	st := sp.Wait(t, 2*time.Minute)
	hwm, anon := sp.Peaks()
	t.Logf("drained in %s; %s; memory: cgroup limit %s, cgroup peak %s (page cache included), anon peak %s, process peak RSS %s, failcnt %d, OOM kills %d",
		drained.Round(100*time.Millisecond), describeExit(st), mib(oomLimit), mib(cg.Peak()), mib(anon), mib(hwm), cg.Failcnt(), cg.OOMKills())
	if n := cg.OOMKills(); n != 0 {
		t.Fatalf("the kernel OOM-killed %d process(es) in spillway's %s cgroup", n, mib(oomLimit))
	}
	if st.ExitCode() != 0 {
		t.Fatalf("spillway after SIGTERM: %s, want exit status 0", describeExit(st))
	}
	if anon >= oomLimit {
		t.Errorf("anonymous memory peaked at %s, at the cgroup's limit %s", mib(anon), mib(oomLimit))
	}

	meta := readIceMeta(t, filepath.Join(out, "catalog.db"))
	if meta == nil {
		t.Fatal("no table in the catalog after the drain")
	}
	manifests, entries := iceManifests(t, meta)
	files := make([]string, len(entries))
	pairs := map[string]bool{}
	dayOf := regexp.MustCompile(`timestamp_day=([0-9-]+)/` + iceTopic + `-([0-9]+)-`)
	for i, e := range entries {
		files[i] = e.path
		if m := dayOf.FindStringSubmatch(e.path); m != nil {
			pairs[m[2]+"@"+m[1]] = true
		}
	}
	t.Logf("table: %d snapshots, %d manifests, %d data files, metadata %s (%d bytes)",
		len(meta.Snapshots), manifests, len(files), filepath.Base(meta.path), meta.size)
	if want := iceWidePartitions * iceWideDays; len(pairs) != want {
		t.Errorf("the table's files hold %d (partition, day) pairs, want %d", len(pairs), want)
	}
	checkIcebergExactlyOnce(t, duck, files, ends)
}
