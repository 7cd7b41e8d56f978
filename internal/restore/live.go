package restore

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Live is a running restore's counters, safe to read while it runs: the
// progress line and the admin endpoint's /metrics read the same values.
// Pass one in Options.Live to read it from outside; the zero value is ready.
type Live struct {
	start          atomic.Int64 // unix nanoseconds; 0 before Run starts producing
	total          atomic.Int64 // records in the files left to read at start
	filesTotal     atomic.Int64
	filesDone      atomic.Int64
	committed      atomic.Int64
	committedBytes atomic.Int64
	skipped        atomic.Int64
	read           atomic.Int64 // read from files, produced or skipped
	txns           atomic.Int64
}

// LiveStats is a point-in-time copy of a Live.
type LiveStats struct {
	Total, Read, Committed, CommittedBytes, Skipped, Txns int64
	FilesTotal, FilesDone                                 int64
	// Left is what is still to restore: Total less what was committed or
	// skipped. ETA is the time reading the rest takes at the mean rate so
	// far, 0 when unknown or nothing is left.
	Left int64
	ETA  time.Duration
	Rate float64 // records read per second since the start
}

// Stats returns the counters now.
func (l *Live) Stats() LiveStats {
	s := LiveStats{
		Total: l.total.Load(), Read: l.read.Load(), Committed: l.committed.Load(),
		CommittedBytes: l.committedBytes.Load(), Skipped: l.skipped.Load(), Txns: l.txns.Load(),
		FilesTotal: l.filesTotal.Load(), FilesDone: l.filesDone.Load(),
	}
	s.Left = max(s.Total-s.Committed-s.Skipped, 0)
	if st := l.start.Load(); st != 0 {
		el := time.Since(time.Unix(0, st)).Seconds()
		s.Rate = float64(s.Read) / max(el, 1e-9)
		if s.Rate > 0 && s.Total > s.Read {
			s.ETA = time.Duration(float64(s.Total-s.Read) / s.Rate * float64(time.Second))
		}
	}
	return s
}

// Collector returns l's metrics for a Prometheus registry (the admin
// endpoint's own): read at scrape time, no state of its own.
func (l *Live) Collector() prometheus.Collector { return liveCollector{l} }

type liveCollector struct{ l *Live }

func rdesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("spillway_restore_"+name, help, nil, nil)
}

var (
	descRecords   = rdesc("records_total", "Records restored: produced and committed in a transaction, with the progress, since the restore started.")
	descBytes     = rdesc("bytes_total", "Bytes of keys, values and headers of the records restored (committed) since the restore started.")
	descRead      = rdesc("records_read_total", "Records read from the data files, produced or skipped.")
	descSkipped   = rdesc("records_skipped_total", "Records read and skipped: below the progress committed by an earlier run, or outside --from-time/--to-time.")
	descPlanned   = rdesc("records_planned", "Records in the files left to read when the restore started (from the ledger).")
	descLeft      = rdesc("records_left", "The restore's lag: records planned and neither committed nor skipped yet.")
	descFiles     = rdesc("files", "Data files left to read when the restore started.")
	descFilesDone = rdesc("files_done_total", "Data files read to their end.")
	descTxns      = rdesc("transactions_total", "Transactions committed, each with the records it carries and their progress.")
	descETA       = rdesc("eta_seconds", "Estimated seconds until every planned record is read, at the mean rate so far; 0 when done or not known yet.")
)

func (c liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descBytes, descRead, descSkipped, descPlanned, descLeft, descFiles, descFilesDone, descTxns, descETA} {
		ch <- d
	}
}

func (c liveCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(descRecords, s.Committed)
	counter(descBytes, s.CommittedBytes)
	counter(descRead, s.Read)
	counter(descSkipped, s.Skipped)
	gauge(descPlanned, float64(s.Total))
	gauge(descLeft, float64(s.Left))
	gauge(descFiles, float64(s.FilesTotal))
	counter(descFilesDone, s.FilesDone)
	counter(descTxns, s.Txns)
	gauge(descETA, s.ETA.Seconds())
}
