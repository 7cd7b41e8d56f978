package sink_test

import (
	"testing"

	"github.com/spillway/spillway/internal/offsets"
)

// Stored counts the records in published files only: records written to a
// file that was dropped with its partition (and consumed again by the next
// owner, or by this process when the partition comes back) are not stored.
func TestStatsStoredCountsPublishedRecordsOnly(t *testing.T) {
	h := newHarness(t)
	h.write(recs("t", 0, 0, 10)...)
	h.s.Drop(map[offsets.TopicPartition]bool{tp("t", 0): true})
	h.write(recs("t", 0, 0, 10)...)
	h.flush()
	st := h.s.Stats()
	if st.Records != 20 || st.Stored != 10 || st.FilesUploaded != 1 {
		t.Fatalf("stats %+v: want 20 written, 10 stored in 1 file", st)
	}
}
