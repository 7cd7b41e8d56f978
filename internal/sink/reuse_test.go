package sink_test

import (
	"io"
	"sync/atomic"
	"testing"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
)

// A file opened after another finished takes its encoder and compressor,
// reset, instead of building new ones; the idle ones stay charged to
// FileEncoders until a file takes them or a full flush lets them go, and
// every file is still whole.
func TestRotationReusesEncoders(t *testing.T) {
	var built atomic.Int64
	b := budget.New(1<<30, 0)
	h := newHarness(t, withBudget(b), withConfig(func(c *sink.Config) {
		c.MaxRecords = 5
		c.NewCompressor = func(w io.Writer) (io.WriteCloser, error) {
			built.Add(1)
			return format.NewCompressor("none", w)
		}
	}))
	const files = 40
	for i := range int64(files) {
		h.write(recs("t", 0, 5*i, 5*i+5)...) // closes the file it opened
		// Wait for the file to be finished, so that the next one finds
		// its chain.
		h.eventually("the file to be stored", func() bool { return h.s.Stats().FilesUploaded == i+1 })
	}
	if n := built.Load(); n != 1 {
		t.Fatalf("%d compressors built for %d files one after another, want 1", n, files)
	}
	if held := holder(b.Snapshot(), budget.FileEncoders); held != compressorMemory {
		t.Fatalf("file encoders hold %d with no file open, want the idle chain's %d", held, compressorMemory)
	}
	h.flush()
	if held := holder(b.Snapshot(), budget.FileEncoders); held != 0 {
		t.Fatalf("file encoders hold %d after a full flush, want 0", held)
	}
	h.contiguous(h.objects(), map[offsets.TopicPartition]int64{tp("t", 0): 5 * files})
}
