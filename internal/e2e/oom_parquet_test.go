package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

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

// oomRow is the part of the envelope countStoredParquet reads: value
// bytes (value_encoding base64 stores them raw), the key and the offset.
type oomRow struct {
	Key    []byte `parquet:"key,optional"`
	Value  []byte `parquet:"value,optional"`
	Offset int64  `parquet:"offset"`
}

// countStoredParquet reads every parquet file under root with
// parquet-go's reader, a few rows at a time, and keeps each record's
// position and value length, checking its key and the text half of its
// value as countStored does.
func countStoredParquet(t *testing.T, root string) stored {
	t.Helper()
	var s stored
	rows := make([]oomRow, 16)
	err := testkit.WalkOutput(root, func(path string) error {
		topic, partition, _, ok := testkit.ParseDefaultName(path)
		if !ok || !strings.HasSuffix(path, ".parquet") {
			return fmt.Errorf("%s: not a {{topic}}-{{partition}}-{{start_offset}}.parquet file", path)
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		s.addFile(path, st.Size())
		r := parquet.NewGenericReader[oomRow](pf)
		defer r.Close()
		line := 0
		for {
			n, err := r.Read(rows)
			for _, row := range rows[:n] {
				line++
				s.valueBytes += int64(len(row.Value))
				s.recs = append(s.recs, testkit.StoredRecord{File: path, Line: line, Topic: topic, Partition: partition, Offset: row.Offset})
				if msg := checkRawRecord(partition, row.Offset, row.Key, row.Value); msg != "" && len(s.badValues) < 10 {
					s.badValues = append(s.badValues, fmt.Sprintf("%s: row %d: %s", path, line, msg))
				}
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: row %d: %w", path, line, err)
			}
		}
	})
	if err != nil {
		t.Fatalf("reading spillway's output: %v", err)
	}
	return s
}

// checkRawRecord is checkRecord for a key and value stored as bytes.
func checkRawRecord(partition int32, offset int64, key, value []byte) string {
	i := int(offset)*oomPartitions + int(partition)
	if string(key) != fmt.Sprintf("big-%d", i) {
		return fmt.Sprintf("partition %d offset %d: key %q, want \"big-%d\"", partition, offset, key, i)
	}
	text := value[len(value)/2:]
	want := backlogPhrase(i)
	if k := min(len(text), len(want)); string(text[:k]) != want[:k] {
		return fmt.Sprintf("partition %d offset %d: value's text half starts %.60q, want %.60q", partition, offset, text, want)
	}
	return ""
}
