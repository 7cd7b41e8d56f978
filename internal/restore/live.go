package restore

import (
	"strconv"
	"sync"
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

	partsMu sync.Mutex
	parts   []*partLive // one per partition of the plan, set when Run starts
}

// Transaction states of a partition (PartitionStats.Txn).
const (
	TxnNone       = "none"       // no record of the partition in an open transaction
	TxnOpen       = "open"       // records produced in the open transaction
	TxnCommitting = "committing" // the open transaction is being flushed and committed
)

var txnStates = [...]string{TxnNone, TxnOpen, TxnCommitting}

// Indexes of txnStates, for partLive.txn.
const (
	txnNone int32 = iota
	txnOpen
	txnCommitting
)

// partLive is one partition's counters.
type partLive struct {
	topic, to string
	partition int32
	from, end int64 // source offsets to restore: from <= offset < end
	planned   int64 // records in the files left to read at start
	read      atomic.Int64
	skipped   atomic.Int64
	committed atomic.Int64
	bytes     atomic.Int64
	next      atomic.Int64 // the progress committed: the next source offset
	firstRead atomic.Int64 // unix nanoseconds of the first record read, 0 before
	txn       atomic.Int32 // index in txnStates
	readToEnd atomic.Bool
	handed    atomic.Int64 // records handed to the producing side
	pendRecs  int64        // in the open transaction; the producing goroutine's own
	pendBytes int64
	pendNext  int64
}

// PartitionStats is one source partition's progress.
type PartitionStats struct {
	Topic     string
	Partition int32
	To        string // the destination topic (same partition number)
	// From and End are the source offsets restored, From <= offset < End:
	// From is the progress found at start (or --from-offset), End one past
	// the last offset the files hold (or --to-offset).
	From, End int64
	// Next is the committed progress: the next source offset to restore.
	Next                                     int64
	Planned, Read, Skipped, Committed, Bytes int64
	Left                                     int64   // planned and neither committed nor skipped
	Rate                                     float64 // records read per second since the partition's first
	ETA                                      time.Duration
	Txn                                      string // TxnNone, TxnOpen or TxnCommitting
	Done                                     bool   // read to its end and all committed
}

func (l *Live) setParts(parts []*partLive) {
	l.partsMu.Lock()
	l.parts = parts
	l.partsMu.Unlock()
}

// Partitions returns each partition's progress now, in the plan's order.
func (l *Live) Partitions() []PartitionStats {
	l.partsMu.Lock()
	parts := l.parts
	l.partsMu.Unlock()
	out := make([]PartitionStats, 0, len(parts))
	now := time.Now()
	for _, p := range parts {
		s := PartitionStats{
			Topic: p.topic, Partition: p.partition, To: p.to, From: p.from, End: p.end, Next: p.next.Load(),
			Planned: p.planned, Read: p.read.Load(), Skipped: p.skipped.Load(), Committed: p.committed.Load(),
			Bytes: p.bytes.Load(), Txn: txnStates[p.txn.Load()],
		}
		s.Left = max(s.Planned-s.Committed-s.Skipped, 0)
		// Done once read to the end and all handed on was committed.
		s.Done = p.readToEnd.Load() && s.Committed == p.handed.Load() && s.Txn == TxnNone
		if st := p.firstRead.Load(); st != 0 {
			s.Rate = float64(s.Read) / max(now.Sub(time.Unix(0, st)).Seconds(), 1e-9)
			if s.Rate > 0 && s.Planned > s.Read {
				s.ETA = time.Duration(float64(s.Planned-s.Read) / s.Rate * float64(time.Second))
			}
		}
		out = append(out, s)
	}
	return out
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

	// Per partition. A Prometheus name has one set of labels, so these are
	// spillway_restore_partition_*, next to the unlabelled totals above.
	partLabels   = []string{"topic", "partition", "to_topic"}
	descPRecords = pdesc("records_total", "Records of the source partition restored: produced and committed with the progress.")
	descPBytes   = pdesc("bytes_total", "Bytes of keys, values and headers of the source partition restored (committed).")
	descPRead    = pdesc("records_read_total", "Records of the source partition read from the data files, produced or skipped.")
	descPSkipped = pdesc("records_skipped_total", "Records of the source partition read and skipped.")
	descPPlanned = pdesc("records_planned", "Records of the source partition in the files left to read when the restore started.")
	descPLeft    = pdesc("records_left", "Records of the source partition planned and neither committed nor skipped yet.")
	descPNext    = pdesc("next_offset", "The committed progress: the next source offset of the partition to restore.")
	descPEnd     = pdesc("end_offset", "One past the last source offset of the partition to restore.")
	descPETA     = pdesc("eta_seconds", "Estimated seconds until the partition is read, at its mean rate so far; 0 when done or not known yet.")
	descPOpenTxn = pdesc("in_transaction", "1 while records of the partition are in the open transaction (produced or being committed), else 0.")
)

func pdesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("spillway_restore_partition_"+name, help, partLabels, nil)
}

func (c liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descBytes, descRead, descSkipped, descPlanned, descLeft, descFiles, descFilesDone, descTxns, descETA,
		descPRecords, descPBytes, descPRead, descPSkipped, descPPlanned, descPLeft, descPNext, descPEnd, descPETA, descPOpenTxn} {
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
	for _, p := range c.l.Partitions() {
		lv := []string{p.Topic, strconv.FormatInt(int64(p.Partition), 10), p.To}
		pm := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
			ch <- prometheus.MustNewConstMetric(d, t, v, lv...)
		}
		pm(descPRecords, prometheus.CounterValue, float64(p.Committed))
		pm(descPBytes, prometheus.CounterValue, float64(p.Bytes))
		pm(descPRead, prometheus.CounterValue, float64(p.Read))
		pm(descPSkipped, prometheus.CounterValue, float64(p.Skipped))
		pm(descPPlanned, prometheus.GaugeValue, float64(p.Planned))
		pm(descPLeft, prometheus.GaugeValue, float64(p.Left))
		pm(descPNext, prometheus.GaugeValue, float64(p.Next))
		pm(descPEnd, prometheus.GaugeValue, float64(p.End))
		pm(descPETA, prometheus.GaugeValue, p.ETA.Seconds())
		inTxn := 0.0
		if p.Txn != TxnNone {
			inTxn = 1
		}
		pm(descPOpenTxn, prometheus.GaugeValue, inTxn)
	}
}
