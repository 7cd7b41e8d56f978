package runner

import (
	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/sink"
)

var allReasons = []sink.Reason{sink.ReasonRecords, sink.ReasonBytes, sink.ReasonAge, sink.ReasonPressure,
	sink.ReasonOpenFiles, sink.ReasonRevoke, sink.ReasonShutdown, sink.ReasonSchema}

// Status adapts the pipeline's counters to what the admin endpoint serves.
func (p *Progress) Status() admin.Status {
	b, st, src := p.Budget(), p.Sink(), p.Source()
	// The storage check passed before there was a Progress to ask; what
	// is left is the consumer's side.
	h := p.source.Health()
	s := admin.Status{
		Ready:               h.Reason == "",
		NotReadyReason:      h.Reason,
		BudgetLimitBytes:    b.Limit,
		BudgetUsedBytes:     b.Used,
		BudgetPeakBytes:     b.Peak,
		BudgetHeldBytes:     map[string]int64{},
		BufferedRecords:     b.Records,
		FetchPaused:         src.Paused,
		PausedPartitions:    pausedPartitions(src.Paused, h.Partitions),
		OpenFiles:           st.FilesOpen,
		UploadsInFlight:     st.Uploading,
		FilesUploaded:       st.FilesUploaded,
		BytesUploaded:       st.BytesUploaded,
		RecordsWritten:      st.Records,
		RecordsSkipped:      st.Skipped,
		RecordsDeadLettered: st.DeadLettered,
		FilesClosed:         map[string]int64{},
		CommittedOffsets:    map[string]map[int32]int64{},
	}
	s.BudgetUnreservedPeakBytes = b.PeakUnreserved
	if err := p.sink.Err(); err != nil {
		s.Ready, s.FatalError = false, err.Error()
	}
	for _, h := range b.By {
		s.BudgetHeldBytes[string(h.Holder)] = h.Bytes
	}
	for _, r := range allReasons {
		s.FilesClosed[string(r)] = st.Closed[r]
	}
	for tp, off := range src.Committed {
		if s.CommittedOffsets[tp.Topic] == nil {
			s.CommittedOffsets[tp.Topic] = map[int32]int64{}
		}
		s.CommittedOffsets[tp.Topic][tp.Partition] = off
	}
	return s
}

// pausedPartitions: back pressure pauses every assigned partition at once.
func pausedPartitions(paused bool, assigned int) int {
	if !paused {
		return 0
	}
	return assigned
}
