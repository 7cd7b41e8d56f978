package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/testkit"
)

// oomParquetBacklog is the parquet case's backlog: a third of the jsonl
// case's, which is enough for every one of the 1000 partitions to open,
// fill and close files many times over in a 256 MiB cgroup, and keeps the
// test within a few minutes.
const oomParquetBacklog = 512 << 20

// TestBoundedMemoryUnderCgroupParquet is TestBoundedMemoryUnderCgroup in
// parquet with zstd: row groups and page buffers are counted in the budget
// as they grow and cut at the plan's threshold (2 MiB in 256 MiB), and the
// records of 256 KiB to 1 MiB cost parquet-go several copies each while
// they are written. Spillway must still drain the backlog without an OOM
// kill, every record exactly once.
func TestBoundedMemoryUnderCgroupParquet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("produces and drains a 512 MiB backlog; skipped with -short")
	}
	drainUnderCgroup(t, oomCase{format: "parquet", compression: "zstd", backlog: parquetBacklog(t), read: countStoredParquet})
}

// TestSpoolUnderCgroupParquet is TestBoundedMemoryUnderCgroupParquet with
// the spool on: an open file then costs a few KiB of memory, its records
// wait on disk and are encoded when it closes, so each of the 1000
// partitions keeps one file open until max_bytes or the end of its data,
// inside the same 256 MiB cgroup. Most files must reach one or the other
// instead of being closed early by memory pressure.
func TestSpoolUnderCgroupParquet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("produces and drains a 512 MiB backlog; skipped with -short")
	}
	drainUnderCgroup(t, oomCase{format: "parquet", compression: "zstd", backlog: parquetBacklog(t), spool: true, read: countStoredParquet})
}

// parquetBacklog is oomParquetBacklog, or SPILLWAY_TEST_OOM_BACKLOG
// (a size in MiB) to measure at another size: the measurement of
// the spool is at 1536.
func parquetBacklog(t *testing.T) int64 {
	v := os.Getenv("SPILLWAY_TEST_OOM_BACKLOG")
	if v == "" {
		return oomParquetBacklog
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("SPILLWAY_TEST_OOM_BACKLOG=%q: want a size in MiB, such as 1536", v)
	}
	return n << 20
}

// countStoredParquet reads every parquet file under root in the
// testdata/readparquet program (built without -race: parquet decoding in
// this process took a minute or more), which keeps each record's position
// and value length, checking its key and the text half of its value as
// countStored does.
func countStoredParquet(t *testing.T, root string) stored {
	t.Helper()
	cmd := exec.Command(binariesFor(t).readParquet, "-partitions", strconv.Itoa(oomPartitions), root)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reading spillway's output in testdata/readparquet: %v\n%s", err, stderr.String())
	}
	var s stored
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		switch {
		case f[0] == "F" && len(f) == 3:
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("readparquet printed %q: %v", line, err)
			}
			s.addFile(f[1], n)
		case f[0] == "R" && len(f) == 6:
			rowNo, err1 := strconv.Atoi(f[2])
			p, err2 := strconv.ParseInt(f[3], 10, 32)
			off, err3 := strconv.ParseInt(f[4], 10, 64)
			n, err4 := strconv.ParseInt(f[5], 10, 64)
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				t.Fatalf("readparquet printed %q: %v", line, err)
			}
			s.valueBytes += n
			s.recs = append(s.recs, testkit.StoredRecord{File: f[1], Line: rowNo, Topic: oomTopic, Partition: int32(p), Offset: off})
		case f[0] == "BAD" && len(f) == 2:
			s.badValues = append(s.badValues, f[1])
		default:
			t.Fatalf("readparquet printed %q", line)
		}
	}
	return s
}
