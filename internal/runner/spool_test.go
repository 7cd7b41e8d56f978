package runner

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/testkit"
)

// TestSpoolEndToEnd drains many partitions with the smallest memory limit
// and a spool: every partition keeps one open file, files close by
// file.max_bytes or at the partition's end (max_age), never under memory
// pressure or the open-file cap, and every record is stored exactly once.
// Without the spool, this memory limit holds a handful of open zstd files.
func TestSpoolEndToEnd(t *testing.T) {
	t.Parallel()
	const parts, perPart, maxBytes = 48, 400, 4 << 10
	cluster := testkit.NewCluster(t, parts, "events")
	cl := cluster.Client(t)
	rng := rand.New(rand.NewPCG(1, 2))
	testkit.Produce(t, cl, "events", parts*perPart, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % parts), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, letters(rng, 60))}
	})
	end := testkit.EndOffsets(t, cl, "events")

	for _, typ := range []string{"jsonl", "parquet"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			spoolDir := filepath.Join(t.TempDir(), "spool")
			cfg := testConfig(cluster.Addrs(), dir)
			cfg.Kafka.Group = "spool-" + typ
			cfg.Format.Type = typ
			cfg.Format.Compression = "zstd"
			cfg.File.MaxRecords = 0
			cfg.File.MaxBytes = maxBytes
			cfg.Backpressure.MemoryLimit = "64MiB"
			cfg.Backpressure.SpoolDir = spoolDir
			cfg.Backpressure.DiskLimit = "1GiB"
			progress, stop := started(t, cfg)
			waitCommitted(t, cl, cfg.Kafka.Group, end)
			p := progress()
			if err := stop(); err != nil {
				t.Fatalf("graceful stop: %v", err)
			}
			if p.Plan.MaxOpenFiles(p.Plan.OpenFiles/8) >= parts {
				t.Fatalf("the plan holds %d open files without a spool: the test needs fewer than %d", p.Plan.MaxOpenFiles(p.Plan.OpenFiles/8), parts)
			}
			var recs []testkit.StoredRecord
			if typ == "parquet" {
				recs = testkit.ReadParquet(t, dir)
			} else {
				recs = testkit.ReadJSONL(t, dir)
			}
			testkit.AssertExactlyOnce(t, recs, "events", end)
			if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); !maps.Equal(got, end) {
				t.Errorf("committed %v, want %v", got, end)
			}
			st := p.Sink()
			if st.Closed[offsets.ReasonPressure] != 0 || st.Closed[offsets.ReasonOpenFiles] != 0 {
				t.Errorf("files closed early with a spool: %v", st.Closed)
			}
			if st.Closed[offsets.ReasonBytes] == 0 {
				t.Errorf("no file closed by max_bytes: %v", st.Closed)
			}
			b := p.Budget()
			if b.Disk.Limit != 1<<30 || b.Disk.Peak == 0 || b.Disk.Used != 0 {
				t.Errorf("disk budget %+v, want a limit of 1GiB, a peak, nothing held after the stop", b.Disk)
			}
			// Memory holds: within the limit, but for what the encode
			// slots charge at once as they go direct (one chain each,
			// counted when charged; see budget.Plan).
			slots := int64(encodeSlots())
			if over := b.Peak - b.Limit; over > slots*(4<<20) {
				t.Errorf("memory peak %dKiB, %dKiB over the limit", b.Peak>>10, over>>10)
			}
			// The process's subdirectory and lock are gone.
			if ents, err := os.ReadDir(spoolDir); err != nil || len(ents) != 0 {
				t.Errorf("spool directory after the stop: %v %v", ents, err)
			}
			// max_bytes is reached approximately: no file far above it,
			// and most of those closed by it (all but each partition's
			// last) not far below.
			last := map[int32]string{}
			var lastOff = map[int32]int64{}
			for _, r := range recs {
				if r.Offset >= lastOff[r.Partition] {
					lastOff[r.Partition], last[r.Partition] = r.Offset, r.File
				}
			}
			sizes := map[string]int64{}
			for _, r := range recs {
				if last[r.Partition] == r.File || sizes[r.File] != 0 {
					continue
				}
				fi, err := os.Stat(r.File)
				if err != nil {
					t.Fatal(err)
				}
				sizes[r.File] = fi.Size()
			}
			var near int
			for f, n := range sizes {
				if n > maxBytes*3/2 {
					t.Errorf("%s is %d bytes, max_bytes %d", f, n, maxBytes)
				}
				if n >= maxBytes/2 {
					near++
				}
			}
			if len(sizes) < parts || near*4 < len(sizes)*3 {
				t.Errorf("%d of %d files closed before their partition's end are at least half of max_bytes; want at least one per partition (%d) and three in four", near, len(sizes), parts)
			}
			t.Logf("%d records in %d files, closed %v, memory peak %dKiB of %dKiB, disk peak %dKiB",
				len(recs), st.FilesUploaded, st.Closed, b.Peak>>10, b.Limit>>10, b.Disk.Peak>>10)
		})
	}
}

func letters(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	fillLetters(r, b)
	return b
}

// TestSpoolDirRemovedWhileRunning: backpressure.spool_dir removed whole
// (by hand, or by a cleaner) under a running process is created again,
// with this process's lock, and the spool goes on: the next files are
// spooled, the log says the directory was removed, and every record is
// stored once. It used to be left gone, every later file written without
// the spool, and the log told to free space on a disk that had room.
func TestSpoolDirRemovedWhileRunning(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	gen := func(from int) func(i int) *kgo.Record {
		return func(i int) *kgo.Record {
			return &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"i":%d}`, from+i)}
		}
	}
	testkit.Produce(t, cl, "events", 200, gen(0))
	dir := t.TempDir()
	spoolDir := filepath.Join(t.TempDir(), "spool")
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Kafka.Group = "spool-removed"
	cfg.File.MaxRecords = 50 // files close by count: new spool files after the removal
	cfg.File.MaxAge = time.Hour
	cfg.Backpressure.SpoolDir = spoolDir
	cfg.Backpressure.DiskLimit = "1GiB"
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress atomic.Pointer[Progress]
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{OnStart: progress.Store})
	}()
	waitFor(t, "the first 200 records stored", func() bool {
		p := progress.Load()
		return p != nil && p.Sink().Stored == 200
	})
	if err := os.RemoveAll(spoolDir); err != nil {
		t.Fatal(err)
	}
	testkit.Produce(t, cl, "events", 200, gen(200))
	waitFor(t, "all 400 records stored", func() bool { return progress.Load().Sink().Stored == 400 })
	// While it runs: the directory is back, with a subdirectory and its lock.
	ents, err := os.ReadDir(spoolDir)
	if err != nil {
		t.Errorf("spool directory not created again: %v", err)
	} else if len(ents) != 2 {
		t.Errorf("spool directory holds %d entries, want this process's subdirectory and lock file", len(ents))
	}
	st := progress.Load().Sink()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if st.SpoolFaults != 0 {
		t.Errorf("%d spool faults: files were written without the spool after its directory was created again", st.SpoolFaults)
	}
	if len(logs.lines("spool directory was removed")) != 1 {
		t.Errorf("no log line says the spool directory was removed")
	}
	if l := logs.lines("ree space"); len(l) != 0 {
		t.Errorf("a removed directory is reported as a full disk: %s", l[0])
	}
	end := testkit.EndOffsets(t, cl, "events")
	testkit.AssertExactlyOnce(t, testkit.ReadJSONL(t, dir), "events", end)
}
