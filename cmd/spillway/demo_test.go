package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/testkit"
)

// TestDemo runs `spillway demo` in-process and checks its verdict, then
// checks the output directory itself with testkit's reader rather than
// trusting the demo's own count.
func TestDemo(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := cli(t, nil, "demo", "--records", "20000", "--partitions", "4", "--out", out)
	wantCode(t, code, exitOK, stdout, stderr)

	var ok bool
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "OK:") {
			ok = true
		}
	}
	if !ok {
		t.Errorf("no line starting with OK: in stdout:\n%s", stdout)
	}
	summary := regexp.MustCompile(`(?m)^summary: 20000 produced, 20000 stored in \d+ files over 4 partitions, 0 missing, 0 duplicated, `)
	if !summary.MatchString(stdout) {
		t.Errorf("no summary line matching %q in stdout:\n%s", summary, stdout)
	}

	// The demo writes into one run-* directory under --out.
	runs, err := filepath.Glob(filepath.Join(out, "run-*"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("want one run-* directory under %s, got %v (%v)", out, runs, err)
	}
	if _, err := os.Stat(runs[0]); err != nil {
		t.Fatal(err)
	}
	recs := testkit.ReadJSONL(t, runs[0])
	ends := map[int32]int64{}
	for _, r := range recs {
		if r.Topic != "demo-events" {
			t.Fatalf("unexpected topic %q in %s", r.Topic, r.File)
		}
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	var total int64
	for _, n := range ends {
		total += n
	}
	if len(ends) > 4 || total != 20000 {
		t.Errorf("stored partitions %v sum to %d, want at most 4 partitions and 20000 records", ends, total)
	}
	testkit.AssertExactlyOnce(t, recs, "demo-events", ends)
}
