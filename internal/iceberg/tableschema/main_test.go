package tableschema

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: FileSchema's
// footer reads are the package's only I/O.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
