package testkit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
// offset: what AssertExactlyOnce looks at, and the value's ValueDigest in
// ValueDigest. Under -race, encoding/json in
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
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 6)
		if len(f) != 6 {
			t.Fatalf("readjsonl printed %q, want 6 fields", line)
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		n, err3 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("readjsonl printed %q: %v", line, err)
		}
		recs = append(recs, StoredRecord{File: f[5], Line: n, Topic: f[4], Partition: int32(p), Offset: off, ValueDigest: f[3]})
	}
	return recs
}

// ValueDigest names a stored jsonl value by its content, so that a test
// can compare big values without decoding them under -race: "s:" and the
// SHA-256 of the text when the value is a JSON string (what a text value
// is written as), "j:" and the SHA-256 of its compacted JSON otherwise.
// TextDigest and JSONDigest give the same for the value that was produced.
func ValueDigest(v json.RawMessage) string {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return TextDigest([]byte(s))
	}
	return JSONDigest(v)
}

// TextDigest is ValueDigest of a value produced as text.
func TextDigest(text []byte) string {
	sum := sha256.Sum256(text)
	return "s:" + hex.EncodeToString(sum[:])
}

// JSONDigest is ValueDigest of a value produced as JSON: its compacted
// form's, "j:invalid" when it is not JSON.
func JSONDigest(v []byte) string {
	var c bytes.Buffer
	if err := json.Compact(&c, v); err != nil {
		return "j:invalid"
	}
	sum := sha256.Sum256(c.Bytes())
	return "j:" + hex.EncodeToString(sum[:])
}
