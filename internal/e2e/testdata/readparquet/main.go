// Command readparquet is a test-only reader for internal/e2e's parquet
// drains (TestBoundedMemoryUnderCgroupParquet, TestSpoolUnderCgroupParquet):
// it reads every parquet file under a directory with parquet-go's reader, a
// few rows at a time, and prints one line per file and per record:
//
//	F <file> <size>
//	R <file> <row> <partition> <offset> <value length>
//
// separated by tabs, then one line per record whose key or value is not the
// one testdata/backlog produced (at most ten):
//
//	BAD <message>
//
// It exits non-zero, naming the file and row, on the first one it can't
// read.
//
// It is a separate program, built without -race, because the e2e tests run
// under -race, and the race detector slows parquet decoding in the test
// process: reading back 512 MiB took 63 to 100 s there on a busy 2-core
// machine.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/spillway/spillway/internal/testkit"
)

// row is the part of the envelope read: value bytes (value_encoding base64
// stores them raw), the key and the offset.
type row struct {
	Key    []byte `parquet:"key,optional"`
	Value  []byte `parquet:"value,optional"`
	Offset int64  `parquet:"offset"`
}

func main() {
	partitions := flag.Int("partitions", 0, "the backlog's partitions: record i is at offset i / partitions of partition i % partitions")
	flag.Parse()
	if flag.NArg() != 1 || *partitions <= 0 {
		fmt.Fprintln(os.Stderr, "usage: readparquet -partitions N DIR")
		os.Exit(2)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	var bad []string
	rows := make([]row, 16)
	err := testkit.WalkOutput(flag.Arg(0), func(path string) error {
		_, partition, _, ok := testkit.ParseDefaultName(path)
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
		fmt.Fprintf(w, "F\t%s\t%d\n", path, st.Size())
		r := parquet.NewGenericReader[row](pf)
		defer r.Close()
		line := 0
		for {
			n, err := r.Read(rows)
			for _, rw := range rows[:n] {
				line++
				fmt.Fprintf(w, "R\t%s\t%d\t%d\t%d\t%d\n", path, line, partition, rw.Offset, len(rw.Value))
				if msg := check(*partitions, partition, rw.Offset, rw.Key, rw.Value); msg != "" && len(bad) < 10 {
					bad = append(bad, fmt.Sprintf("%s: row %d: %s", path, line, msg))
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
		fmt.Fprintln(os.Stderr, "readparquet:", err)
		os.Exit(1)
	}
	for _, msg := range bad {
		fmt.Fprintf(w, "BAD\t%s\n", strings.ReplaceAll(msg, "\n", `\n`))
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "readparquet:", err)
		os.Exit(1)
	}
}

// check is "" if key and value are those of the backlog's record at offset
// of partition, or what is wrong: the key "big-<i>", and the text half of
// the value testdata/backlog writes (keep the two in step).
func check(partitions int, partition int32, offset int64, key, value []byte) string {
	i := int(offset)*partitions + int(partition)
	if string(key) != fmt.Sprintf("big-%d", i) {
		return fmt.Sprintf("partition %d offset %d: key %q, want \"big-%d\"", partition, offset, key, i)
	}
	text := value[len(value)/2:]
	want := fmt.Sprintf("record %d of partition %d: the quick brown fox jumps over the lazy dog. ", i, i%partitions)
	if k := min(len(text), len(want)); string(text[:k]) != want[:k] {
		return fmt.Sprintf("partition %d offset %d: value's text half starts %.60q, want %.60q", partition, offset, text, want)
	}
	return ""
}
