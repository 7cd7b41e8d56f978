package runner

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/spillway/spillway/internal/testkit"
)

// binDir holds the programs the tests build; TestMain makes it before any
// test runs and removes it after the last.
var binDir string

// readJSONL builds testkit's readjsonl program (without -race) once per
// test binary run, on first use.
var readJSONL = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "readjsonl")
	return bin, testkit.GoBuild(bin, testkit.ReadJSONLProgram, false)
})

// readStoredOffsets is testkit.ReadStoredOffsets: what AssertExactlyOnce
// needs, read outside the race detector. The tests that store tens of MiB
// (slow storage, the storage faults) spent about half a minute each
// decoding them under -race in this process.
func readStoredOffsets(t *testing.T, root string) []testkit.StoredRecord {
	t.Helper()
	bin, err := readJSONL()
	if err != nil {
		t.Fatal(err)
	}
	return testkit.ReadStoredOffsets(t, bin, root)
}
