package runner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/source"
)

// TestStatusOfAPause: what /status says of a pause that source reports
// (source's TestStorageStallPausesFetching and TestLagWhilePaused drive
// the pause itself, and the end offsets it lists): fetch_paused, every
// assigned partition paused, none once fetching resumed, and lag as the
// listed end offset minus the commit.
func TestStatusOfAPause(t *testing.T) {
	if n := pausedPartitions(true, 8); n != 8 {
		t.Errorf("paused_partitions while paused with 8 assigned: %d, want 8", n)
	}
	if n := pausedPartitions(false, 8); n != 0 {
		t.Errorf("paused_partitions after fetching resumed: %d, want 0", n)
	}
	tp := offsets.TopicPartition{Topic: "events", Partition: 0}
	src := source.Stats{Paused: true,
		Committed:      map[offsets.TopicPartition]int64{tp: 100},
		HighWatermarks: map[offsets.TopicPartition]int64{tp: 5_100}}
	pts := partitions([]offsets.TopicPartition{tp}, src, nil)
	if len(pts) != 1 || !pts[0].Paused || pts[0].Lag != 5_000 {
		t.Errorf("partitions = %+v, want events/0 paused with lag 5000 (listed end 5100, committed 100)", pts)
	}
}

// TestShutdownErrWording: a graceful stop whose final commit the broker
// refused (source's TestStopCommitRefused: a ShutdownError with Committed
// set) says the files are stored and the offsets not committed, with the
// refusal; it does not blame shutdown.timeout, which it used to for any
// failure of the stop.
func TestShutdownErrWording(t *testing.T) {
	refused := &source.ShutdownError{Committed: errors.New("commit offsets: commit events/0: " + kerr.OffsetMetadataTooLarge.Error())}
	msg := shutdownErr(refused, false, 10*time.Minute).Error()
	if strings.Contains(msg, "shutdown.timeout") || !strings.Contains(msg, "files are stored, but their offsets could not all be committed") ||
		!strings.Contains(msg, "OFFSET_METADATA_TOO_LARGE") {
		t.Errorf("stop: %s; want the refused commit named, and shutdown.timeout not blamed", msg)
	}
}
