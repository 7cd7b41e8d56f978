package datafile

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no footer read leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
