package parquet

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type failWriter struct {
	err    error
	writes int
}

func (w *failWriter) Write(p []byte) (int, error) { w.writes++; return 0, w.err }
