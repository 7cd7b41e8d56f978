package testkit

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// ReadJSONLProgram is the package of the readjsonl program, for GoBuild
// (built without -race).
const ReadJSONLProgram = "github.com/spillway/spillway/internal/testkit/readjsonl"

// ReadStoredOffsets is ReadJSONL(t, root) without the keys, values,
// headers and timestamps: it reads and checks every line as ReadJSONL
// does, in the readjsonl program at bin (ReadJSONLProgram, built without
// -race), and returns each record's file, line, topic, partition and
// offset: what AssertExactlyOnce looks at. Under -race, encoding/json in
// the test process is about ten times slower; tests that store hundreds of
// MiB and check only which offsets are there read through this.
func ReadStoredOffsets(t testing.TB, bin, root string) []StoredRecord {
	t.Helper()
	cmd := exec.Command(bin, root)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ReadJSONL(%s), in %s: %v\n%s", root, bin, err, stderr.String())
	}
	var recs []StoredRecord
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 5)
		if len(f) != 5 {
			t.Fatalf("readjsonl printed %q, want 5 fields", line)
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		n, err3 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("readjsonl printed %q: %v", line, err)
		}
		recs = append(recs, StoredRecord{File: f[4], Line: n, Topic: f[3], Partition: int32(p), Offset: off})
	}
	return recs
}
