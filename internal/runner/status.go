package runner

import (
	"cmp"
	"slices"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/source"
)

// Status adapts the pipeline's counters to what the admin endpoint serves.
func (p *Progress) Status() admin.Status {
	b, st, src := p.Budget(), p.Sink(), p.Source()
	// The storage check passed before there was a Progress to ask; what
	// is left is the consumer's side.
	h := p.source.Health()
	s := admin.Status{
		Ready:               h.Reason == "",
		NotReadyReason:      h.Reason,
		NoTopicMatches:      h.NoTopicMatches,
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
		RecordsLost:         st.Lost,
		RecordsDeadLettered: st.DeadLettered,
		FilesClosed:         map[string]int64{},
		CommittedOffsets:    map[string]map[int32]int64{},
	}
	s.BudgetUnreservedPeakBytes = b.PeakUnreserved
	s.DiskLimitBytes, s.DiskHighBytes, s.DiskUsedBytes, s.DiskPeakBytes = b.Disk.Limit, b.Disk.High, b.Disk.Used, b.Disk.Peak
	s.DiskHeldBytes = map[string]int64{}
	for _, h := range b.Disk.By {
		s.DiskHeldBytes[string(h.Holder)] = h.Bytes
	}
	s.SpoolFaults = st.SpoolFaults
	if p.reg != nil {
		r := p.reg.Stats()
		s.SchemaRegistry = &admin.RegistryStatus{SchemasFetched: r.Fetched, UnknownIDs: r.Missing, FailedTries: r.Retries, Waiting: r.Waiting, Undeclared: r.Undeclared}
	}
	if err := p.sink.Err(); err != nil {
		s.Ready, s.FatalError = false, err.Error()
	}
	for _, h := range b.By {
		s.BudgetHeldBytes[string(h.Holder)] = h.Bytes
	}
	for _, r := range offsets.Reasons {
		s.FilesClosed[string(r)] = st.Closed[r]
	}
	for tp, off := range src.Committed {
		if s.CommittedOffsets[tp.Topic] == nil {
			s.CommittedOffsets[tp.Topic] = map[int32]int64{}
		}
		s.CommittedOffsets[tp.Topic][tp.Partition] = off
	}
	s.BudgetHighBytes = b.High
	s.Pauses = src.Pauses
	s.PausedSeconds = src.PausedFor.Seconds()
	s.Version = p.version
	s.Warnings = p.warnings
	s.Partitions = partitions(h.Assigned, src, p.sink.OpenFiles())
	for _, pt := range s.Partitions {
		s.LagRecords += pt.Lag
	}
	if p.mon != nil {
		stalled, since := p.mon.liveness()
		s.StallTimeoutSeconds = p.mon.stallTimeout.Seconds()
		s.LastProgressSeconds = since.Seconds()
		// The clock runs between the monitor's looks, which a busy
		// machine delays: what waits now decides, by the monitor's own
		// rule (no lag, or held back by something with an alert of its
		// own, is no stall), so that an idle pipeline never reads as
		// stalled because the look that saw it drain came late.
		_, _, held := p.mark()
		if stalled && s.LagRecords > 0 && !held {
			s.Stalled, s.StalledReason = true, stallReason(since, s.LagRecords, s)
		}
		s.Throughput, s.RecentCloses = p.mon.history()
	}
	return s
}

// mark reads the progress counters, the total lag, and whether something
// that has its own alert holds the pipeline back, for the monitor's loop.
func (p *Progress) mark() (mark progressMark, lag int64, held bool) {
	b, st, src, h := p.Budget(), p.Sink(), p.Source(), p.source.Health()
	for _, pt := range partitions(h.Assigned, src, nil) {
		lag += pt.Lag
	}
	// Back pressure and an unreachable schema registry explain a lack of
	// progress, and have their own metrics to alert on: a restart would
	// fix neither.
	held = b.Paused || src.Paused || b.Used > b.High || p.reg != nil && p.reg.Stats().Waiting
	return markOf(st, src), lag, held
}

func markOf(st sink.Stats, src source.Stats) progressMark {
	m := progressMark{written: st.Records, stored: st.FilesUploaded, bytes: st.BytesUploaded}
	for _, off := range src.Committed {
		m.committed += off
	}
	return m
}

// partitions describes the assigned partitions, sorted. Lag is the end
// offset the last fetch saw (or the source listed, while fetching is
// paused) minus the committed offset, or minus the first offset fetched
// before this process committed any.
func partitions(assigned []offsets.TopicPartition, src source.Stats, open []sink.OpenFile) []admin.Partition {
	out := make([]admin.Partition, 0, len(assigned))
	idx := map[offsets.TopicPartition]int{}
	for _, tp := range assigned {
		pt := admin.Partition{Topic: tp.Topic, Partition: tp.Partition, Paused: src.Paused, Committed: -1, HighWatermark: -1}
		if off, ok := src.Committed[tp]; ok {
			pt.Committed = off
		}
		if hw, ok := src.HighWatermarks[tp]; ok {
			pt.HighWatermark = hw
			from, ok := src.Committed[tp]
			if !ok {
				from, ok = src.FirstFetched[tp]
			}
			if ok {
				pt.Lag = max(hw-from, 0)
			}
		}
		idx[tp] = len(out)
		out = append(out, pt)
	}
	for _, f := range open {
		if i, ok := idx[f.Partition]; ok {
			out[i].OpenFiles = append(out[i].OpenFiles, f.Key)
			out[i].OpenRecords += f.Records
		}
	}
	slices.SortFunc(out, func(a, b admin.Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for i := range out {
		slices.Sort(out[i].OpenFiles)
	}
	return out
}

// pausedPartitions: back pressure pauses every assigned partition at once.
func pausedPartitions(paused bool, assigned int) int {
	if !paused {
		return 0
	}
	return assigned
}
