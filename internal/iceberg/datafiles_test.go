package iceberg

import (
	"errors"
	"strings"
	"testing"
)

// TestDataFileRefusedIsErrRefused: a file whose folder contradicts the
// ledger (package datafile refuses it) fails the commit with ErrRefused,
// which stops the committer rather than retrying, with the table's name
// before datafile's reason. (A file that can't be read fails earlier, in
// the schema check; datafile's own tests cover its read errors.)
func TestDataFileRefusedIsErrRefused(t *testing.T) {
	t.Parallel()
	o := sqlOptions("kafka.events")
	o.PartitionBy = []string{"partition", "day(timestamp)"}
	tb := openTable(t, open(t, o, t.TempDir()), "kafka.events")
	commit(t, tb, envFile(t, tb.Location(), "partition=0/timestamp_day=2026-03-01/", 0, 0, 20, 0, 0))
	wrong := envFile(t, tb.Location(), "partition=2/timestamp_day=2026-03-01/", 1, 0, 20, 0, 0)
	err := tb.Commit(testCtx(t), []File{wrong})
	if err == nil || !errors.Is(err, ErrRefused) || !strings.HasPrefix(err.Error(), "iceberg: kafka.events: file ") ||
		!strings.Contains(err.Error(), "of Kafka partition 1 is in the folder partition=2") {
		t.Errorf("Commit of a file in another partition's folder = %v, want ErrRefused naming the folder", err)
	}
}
