// Command readjsonl is a test-only reader (see testkit.ReadStoredOffsets): it reads every
// jsonl file under a directory with testkit.ReadJSONLDir (the reader the
// tests use, which checks every line) and prints one line per record:
//
//	<partition> <offset> <line> <value digest> <topic> <file>
//
// The value digest is ValueDigest of the stored value: what a test that
// checks big values compares, without holding or decoding them under -race.
//
// separated by tabs, in ReadJSONLDir's order. It exits non-zero, naming the
// file and line, on the first record that can't be read.
//
// It is a separate program, built without -race, because the tests run
// under -race, and the race detector slows encoding/json about tenfold:
// reading back the 300,000 records of 1 KiB of TestCrashExactlyOnce took
// eight minutes in the test process on a busy 2-core machine. The tests
// that check only which offsets are stored read through it.
package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/spillway/spillway/internal/testkit"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: readjsonl DIR")
		os.Exit(2)
	}
	recs, err := testkit.ReadJSONLDir(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "readjsonl:", err)
		os.Exit(1)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	for _, r := range recs {
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\n", r.Partition, r.Offset, r.Line, testkit.ValueDigest(r.Value), r.Topic, r.File)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "readjsonl:", err)
		os.Exit(1)
	}
}
