package local_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain is the one TestMain of package local's tests: goleak checks
// that no directory sync round, writer or bucket leaves a goroutine
// behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests of the local backend's behaviour go through storage.Bucket, the
// way every caller reaches it (as gocloud's fileblob tests go through
// blob): what they assert is the Storage contract on a directory. Only the
// test binary imports storage; package local itself does not.
