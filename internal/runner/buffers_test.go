package runner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/bench/benchdata"
	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/testkit"
)

// TestParquetRowGroupsFromTheBudget drains some 24 MiB of 1 KiB values
// into parquet+zstd files with a 64MiB memory_limit: each row group is cut
// at the threshold derived from the plan (half a file's share, 1 MiB
// here, where the default would be 4 MiB); the row groups open files
// buffer are in the budget (file_buffers) while the files are open, and
// given back once they are written.
func TestParquetRowGroupsFromTheBudget(t *testing.T) {
	t.Parallel()
	const partitions, n = 4, 24_000
	cluster := testkit.NewCluster(t, partitions, "events")
	cl := cluster.Client(t)
	rng := rand.New(rand.NewPCG(5, 6))
	testkit.Produce(t, cl, "events", n, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % partitions), Key: fmt.Appendf(nil, "k%d", i), Value: benchdata.Value(rng, i, 1024)}
	})
	end := testkit.EndOffsets(t, cl, "events")

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Kafka.Group = "parquet-buffers"
	cfg.Format.Type = "parquet"
	cfg.Format.Compression = "zstd"
	cfg.Backpressure.MemoryLimit = "64MiB"
	cfg.File.MaxRecords = 0
	cfg.File.MaxBytes = 512 * config.MiB
	cfg.File.MaxAge = time.Hour
	// The stop encodes and uploads every open file; the test asserts that
	// it succeeds and empties file_buffers, not how fast (20 s was too
	// short once with four tests at once on a busy machine).
	cfg.Shutdown.Timeout = 2 * time.Minute
	plan, _, err := MemoryPlan(cfg.Backpressure)
	if err != nil {
		t.Fatal(err)
	}
	flush := formats.Of(cfg.Format.Type).FlushBytes(plan.FileShare(0))
	if flush >= formats.Of("parquet").DefaultFlushBytes() {
		t.Fatalf("the plan's row group threshold %d B is not below the default: the test can't tell them apart", flush)
	}
	progress, stop := started(t, cfg)

	// Every record written, no file closed yet (max_age 1h, max_bytes
	// 512MiB): what the open row groups hold is counted.
	deadline := time.Now().Add(waitDeadline)
	for {
		if p := progress(); p != nil && p.Sink().Records >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spillway did not write %d records in 2 minutes", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	open := held(progress().Budget(), budget.FileBuffers)
	files := progress().Sink().FilesOpen
	if max := int64(files) * formats.Of(cfg.Format.Type).MaxBuffered(flush); open <= 0 || open > max {
		t.Errorf("file_buffers holds %d B with %d parquet files open, want more than 0 and at most %d B", open, files, max)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if after := held(progress().Budget(), budget.FileBuffers); after != 0 {
		t.Errorf("file_buffers holds %d B after the stop, want 0", after)
	}
	t.Logf("row group threshold %d B (data budget %d MiB); %d B buffered by %d open files before the stop", flush, plan.Data>>20, open, files)

	var rowGroups int
	err = testkit.WalkOutput(dir, func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rgs := f.Metadata().RowGroups
		for i, rg := range rgs {
			var size int64
			for _, c := range rg.Columns {
				size += c.MetaData.TotalCompressedSize
			}
			if size > flush+flush/8 {
				t.Errorf("%s: row group %d holds %d B compressed, want at most the threshold %d B and a page", path, i, size, flush)
			}
		}
		rowGroups += len(rgs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.AssertExactlyOnce(t, testkit.ReadParquet(t, dir), "events", end)
	if rowGroups < 2*partitions {
		t.Errorf("%d row groups in %d partitions' files: not cut at the threshold", rowGroups, partitions)
	}
}

func held(s budget.Snapshot, h budget.Holder) int64 {
	for _, hb := range s.By {
		if hb.Holder == h {
			return hb.Bytes
		}
	}
	return 0
}
