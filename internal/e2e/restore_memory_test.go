package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway/spillway/internal/testkit"
)

const (
	restoreMemPartitions = 4
	restoreMemRecords    = 760 // values of 64 KiB to 768 KiB: about 300 MiB
	// Files of 95 records (about 37 MiB of values, 50 MiB of base64):
	// 2 per partition, all closed, so that the sink commits the end.
	restoreMemFileRecords = 95
	restoreMemLimit       = 128 << 20 // the cgroup's hard limit
	// restoreMemAnonBound is what the restore's anonymous memory (heap,
	// stacks) must stay under: 8 MiB clear of the cgroup's limit. With
	// memory_limit auto the restore's GOMEMLIMIT is 85% of the limit
	// (108.8 MiB), so the Go runtime collects harder before it; what it
	// must hold live is the producer's buffer (16 MiB here), the
	// read-ahead (4 partitions, a few 1 MiB batches, plus the record that
	// crosses the line, up to 768 KiB here), the decoders and the
	// producer's encoded requests. Measured: 106 to 110 MiB.
	restoreMemAnonBound = restoreMemLimit - 8<<20
	// restoreMemBrokerRate is how fast the broker takes the restore's
	// records: it sleeps in each produce request for its bytes at this
	// rate, on the produce connection only (kfake's SleepControl), so the
	// producer's buffer fills while reading goes on as fast as it can.
	restoreMemBrokerRate = 24 << 20 // bytes per second
)

// restoreMemValue is record i's value: 64 KiB to 768 KiB of random bytes
// (random so that the files are about as large as the records, and the
// zstd frames as large as the data), the same for the same i.
func restoreMemValue(i int) []byte {
	n := 64<<10 + (i*7919)%(704<<10)
	v := make([]byte, n)
	rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	for j := 0; j < n; j += 8 {
		x := rng.Uint64()
		for k := 0; k < 8 && j+k < n; k++ {
			v[j+k] = byte(x >> (8 * k))
		}
	}
	return v
}

// TestRestoreBoundedMemorySlowBroker restores about 300 MiB of records of
// 64 KiB to 768 KiB, stored as jsonl (zstd, base64) by `spillway run`,
// with the real binary inside a 128 MiB memory cgroup while the broker
// takes produce requests slowly: it sleeps in each of the restore's
// produce requests for its bytes at 24 MiB/s, on the produce connection
// (the transaction's other requests go on). The producer's buffer
// (kgo.MaxBufferedBytes, 32 MiB) fills, and what must stop then is the
// reading, not memory: the restore must not be OOM-killed, its anonymous
// memory must stay under restoreMemAnonBound, and a read_committed
// consumer must find every record in DST exactly once, in order, byte for
// byte.
//
// The broker runs in this test's process, outside the cgroup. The data
// files are written by `spillway run` outside the cgroup too, so their page
// cache is charged to the test's cgroup, not the restore's; the restore's
// anonymous memory is what its bounds govern.
//
// The restore reads the cgroup's limit (backpressure.memory_limit: auto)
// and sizes its Go heap limit and the producer's buffer from it
// (restore.BufferFor). Before it did (a fixed 32 MiB buffer, no
// GOMEMLIMIT, 16 MiB transactions), it was OOM-killed here at 10% of the
// restore. A commit flushes, so a transaction's size bounds what is
// unacknowledged too: the test runs with --txn-bytes 48MiB, three times
// the buffer, so that the buffer is the bound a slow broker meets (with
// the default 16 MiB transactions, a 1 GiB buffer passed; with 256 MiB
// ones it was OOM-killed at 33%). 256 MiB transactions outlast the
// producer's transaction timeout against this broker, which aborts them.
func TestRestoreBoundedMemorySlowBroker(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stores and restores 300 MiB under a memory cgroup; skipped with -short")
	}
	// Probe first: a machine without a writable memory cgroup skips here
	// (fails under SPILLWAY_TEST_REQUIRE_TOOLS=1) before the work.
	newMemCgroup(t, restoreMemLimit).remove(t)
	bins := binariesFor(t)

	cluster := testkit.NewCluster(t, restoreMemPartitions, "src", "dst")
	cl := cluster.Client(t, kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(64<<20))
	var total int64
	testkit.Produce(t, cl, "src", restoreMemRecords, func(i int) *kgo.Record {
		v := restoreMemValue(i)
		total += int64(len(v))
		return &kgo.Record{Partition: int32(i % restoreMemPartitions), Key: []byte(strconv.Itoa(i)), Value: v,
			Timestamp: time.UnixMilli(1.6e12 + int64(i))}
	})
	ends := testkit.EndOffsets(t, cl, "src")
	t.Logf("src: %d records, %s of values", restoreMemRecords, mib(total))

	out := filepath.Join(t.TempDir(), "out")
	checkDisk(t, filepath.Dir(out), uint64(total)*2)
	config := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: restore-mem
  topics: [src]
storage:
  url: "file://%s"
format:
  type: jsonl
  compression: zstd
  value_encoding: base64
  fields: [key, value, offset, timestamp, headers]
file:
  max_records: %d
  max_age: 1h
backpressure:
  memory_limit: 512MiB
admin:
  listen: ""
`, cluster.Addrs()[0], out, restoreMemFileRecords)
	p := startSpillway(t, config, nil)
	p.WaitRunning(t)
	testkit.Eventually(t, "the sink committing the end of src", func() bool {
		return maps.Equal(testkit.CommittedOffsets(t, cl, "restore-mem", "src"), ends)
	})
	p.Signal(t, syscall.SIGTERM)
	if st := p.Wait(t, 2*time.Minute); !st.Success() {
		t.Fatalf("spillway run: %s", describeExit(st))
	}

	// The slow broker: only the restore's produce requests (transactional)
	// are slowed, and each sleeps for its bytes.
	fake := cluster.Fake()
	var slowed, slowedBytes atomic.Int64
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		pr, ok := req.(*kmsg.ProduceRequest)
		if !ok || pr.TransactionID == nil {
			return nil, nil, false
		}
		var n int
		for _, tp := range pr.Topics {
			for _, pp := range tp.Partitions {
				n += len(pp.Records)
			}
		}
		slowed.Add(1)
		slowedBytes.Add(int64(n))
		fake.SleepControl(func() { time.Sleep(time.Duration(n) * time.Second / restoreMemBrokerRate) })
		return nil, nil, false
	})

	cfgPath := filepath.Join(t.TempDir(), "spillway.yaml")
	// The restore sizes itself from backpressure.memory_limit: auto reads
	// the cgroup's limit, as in a container.
	restoreConfig := strings.Replace(config, "memory_limit: 512MiB", "memory_limit: auto", 1)
	if err := os.WriteFile(cfgPath, []byte(restoreConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cg := newMemCgroup(t, restoreMemLimit)
	// Transactions far larger than the producer's buffer: the buffer, not
	// a commit's flush, is what holds unacknowledged records back.
	r := startRestoreProc(t, bins.spillway, cg, "restore", "--config", cfgPath, "--to-topic", "dst", "--txn-bytes", "48MiB")
	st := r.Wait(t, 5*time.Minute)
	hwm, anon := r.Peaks()
	t.Logf("restore: %s; VmHWM %s, cgroup anon peak %s, cgroup peak %s (limit %s), failcnt %d, OOM kills %d; broker slowed %d produce requests (%s)",
		describeExit(st), mib(hwm), mib(anon), mib(cg.Peak()), mib(restoreMemLimit), cg.Failcnt(), cg.OOMKills(), slowed.Load(), mib(slowedBytes.Load()))
	if k := cg.OOMKills(); k > 0 || !st.Success() {
		t.Fatalf("restore under a %s cgroup: %s, %d OOM kills; its log:\n%s", mib(restoreMemLimit), describeExit(st), k, tail(r.LogPath, 20))
	}
	if anon > restoreMemAnonBound {
		t.Errorf("the restore's anonymous memory peaked at %s, over the bound of %s", mib(anon), mib(restoreMemAnonBound))
	}
	// The condition the test is about: the broker took the restore's
	// records slowly, all of them (kfake stores a batch only after the
	// control function has slept for it).
	if slowedBytes.Load() < total {
		t.Fatalf("the broker slowed %s of produce requests, less than the %s restored: the restore was not held back by the broker", mib(slowedBytes.Load()), mib(total))
	}

	// DST read_committed, up to a sentinel at each partition's end: every
	// record once, in order, byte for byte.
	testkit.Produce(t, cl, "dst", restoreMemPartitions, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i), Headers: []kgo.RecordHeader{{Key: "sentinel"}}}
	})
	rd := cluster.Client(t, kgo.ConsumeTopics("dst"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	next := map[int32]int{} // the next source record index each partition must hold
	for p := range int32(restoreMemPartitions) {
		next[p] = int(p)
	}
	seen := map[int32]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for len(seen) < restoreMemPartitions && !t.Failed() {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read dst: %v (at %v)", ctx.Err(), next)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if len(rec.Headers) == 1 && rec.Headers[0].Key == "sentinel" {
				seen[rec.Partition] = true
				return
			}
			i := next[rec.Partition]
			switch {
			case seen[rec.Partition]:
				t.Errorf("dst/%d: record %q after the sentinel", rec.Partition, rec.Key)
			case string(rec.Key) != strconv.Itoa(i):
				t.Errorf("dst/%d offset %d: key %q, want %d (a record missing, twice or out of order)", rec.Partition, rec.Offset, rec.Key, i)
			case !bytes.Equal(rec.Value, restoreMemValue(i)) || rec.Timestamp.UnixMilli() != int64(1.6e12)+int64(i) || len(rec.Headers) != 0:
				t.Errorf("dst/%d offset %d (record %d): value of %d bytes, timestamp %d, %d headers: not what was produced", rec.Partition, rec.Offset, i, len(rec.Value), rec.Timestamp.UnixMilli(), len(rec.Headers))
			}
			next[rec.Partition] = i + restoreMemPartitions
		})
	}
	for p := range int32(restoreMemPartitions) {
		if want := int(p) + int(ends[p])*restoreMemPartitions; next[p] != want {
			t.Errorf("dst/%d: ended at record %d, want %d", p, next[p], want)
		}
	}
}

// startRestoreProc starts the spillway binary with args (a `restore`
// command line) inside cg, as startSpillway starts `run`: the same
// spillwayProc, sampled for its peaks until it exits.
func startRestoreProc(t *testing.T, bin string, cg *memCgroup, args ...string) *spillwayProc {
	t.Helper()
	return startProc(t, cg, filepath.Join(t.TempDir(), "restore.log"), append([]string{bin}, args...)...)
}
