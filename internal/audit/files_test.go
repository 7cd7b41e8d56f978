package audit

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/testkit/datafiles"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Data files are written as Spillway does by datafiles, which ledger's and
// readback's tests share; these names keep the tests' calls short.
var (
	writeFile = datafiles.Write
	putFile   = datafiles.Put
	openDir   = datafiles.OpenDir
)

// flip inverts the bits of d[i].
func flip(d []byte, i int) []byte {
	d[i] ^= 0xff
	return d
}
