package storage_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain is the one TestMain of package storage's tests: goleak checks
// that no writer, part queue or bucket leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
