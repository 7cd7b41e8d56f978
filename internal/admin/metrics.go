package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector turns one Source.Snapshot into Spillway's metrics at scrape
// time. It keeps no state: values live in the pipeline, not here.
type collector struct {
	src Source
}

func newCollector(src Source) *collector { return &collector{src: src} }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("spillway_"+name, help, labels, nil)
}

var (
	descBudgetLimit = desc("budget_limit_bytes",
		"Byte budget for all data Spillway holds (fetched records, encoder state, encoded bytes, upload parts). Above its high watermark fetching pauses and large files are flushed early.")
	descBudgetUsed = desc("budget_used_bytes",
		"Bytes currently held against the budget. Compare with spillway_budget_limit_bytes to see how close back pressure is.")
	descBudgetPeak = desc("budget_peak_bytes",
		"Highest spillway_budget_used_bytes since start: shows whether the budget was ever approached.")
	descBudgetHeld = desc("budget_held_bytes",
		"Bytes of memory held by each holder (fetch_buffers, polled_records, queued_records, file_encoders, file_buffers, writer_buffers, queued_chunks, closed_files, held_objects, spool_files): shows where memory goes when the budget is tight. polled_unreserved, records larger than the budget's room, is held apart, over the limit.",
		"holder")
	descBudgetUnreservedPeak = desc("budget_unreserved_peak_bytes",
		"Most bytes of records larger than the budget's room held at once since start, over the limit: give the process memory_limit plus this.")
	descDiskLimit = desc("disk_budget_limit_bytes",
		"The disk budget for the spool (backpressure.disk_limit): records of open files staged on local disk. 0 without a spool (backpressure.spool_dir).")
	descDiskUsed = desc("disk_budget_used_bytes",
		"Bytes of the spool held against the disk budget. Above its high watermark fetching pauses and the files with the most spooled bytes close early, as for memory.")
	descDiskPeak = desc("disk_budget_peak_bytes",
		"Highest spillway_disk_budget_used_bytes since start.")
	descDiskHigh = desc("disk_budget_high_watermark_bytes",
		"The disk budget's high watermark: above it fetching pauses.")
	descDiskHeld = desc("disk_budget_held_bytes",
		"Bytes of the disk budget held by each holder (spooled_records).",
		"holder")
	descSpoolFaults = desc("spool_faults_total",
		"Spool files that could not be created or appended to (disk full, directory gone or read-only) since start; their files were written without the spool, in memory.")
	descRegistryFetched = desc("schema_registry_schemas_fetched_total",
		"Schemas fetched from the schema registry and cached since start (0 without schema_registry.url).")
	descRegistryUnknown = desc("schema_registry_unknown_ids_total",
		"Schema ids the registry did not know since start; the records that carry them go to the error policy.")
	descRegistryFailed = desc("schema_registry_failed_requests_total",
		"Requests to the schema registry that failed (unreachable, timed out, server error) and were retried with backoff since start.")
	descRegistryWaiting = desc("schema_registry_waiting",
		"1 while consumption of every partition waits for an unreachable schema registry (nothing is dropped; it is not counted as a stall), else 0.")
	descRegistryUndeclared = desc("schema_registry_undeclared_total",
		"JSON Schema values decoded for avro or parquet files since start whose JSON had properties the schema does not declare: the files hold them without those properties (write jsonl, or declare them, to keep them).")
	descBufferedRecords = desc("buffered_records",
		"Records fetched from Kafka and not yet durable in storage; their offsets can't be committed yet.")
	descFetchPaused = desc("fetch_paused",
		"1 while fetching from Kafka is paused by back pressure (budget above its high watermark), else 0. Long pauses mean storage is slower than Kafka.")
	descPausedPartitions = desc("fetch_paused_partitions",
		"Partitions whose fetching is currently paused.")
	descOpenFiles = desc("open_files",
		"Files being written and not yet closed; each holds encoder state and buffered bytes.")
	descUploadsInFlight = desc("uploads_in_flight",
		"Closed files whose upload to storage has not finished yet.")
	descFilesUploaded = desc("files_uploaded_total",
		"Files uploaded to storage and durable since start.")
	descBytesUploaded = desc("bytes_uploaded_total",
		"Bytes uploaded to storage since start (after format and compression).")
	descRecordsWritten = desc("records_written_total",
		"Records written to files since start.")
	descRecordsSkipped = desc("records_skipped_total",
		"Records skipped by the error policy (errors.tolerance: all) since start: data deliberately not in storage.")
	descRecordsLost = desc("records_lost_total",
		"Offsets passed without being stored since start, by cause: retention (the log deleted them before Spillway stored them: retention, DeleteRecords or an unclean leader election). Always 0 in a healthy deployment; the ledger records each gap and spillway verify reports it.",
		"cause")
	descRecordsDeadLettered = desc("records_dead_lettered_total",
		"Records sent to the dead-letter topic (errors.dead_letter_topic) since start, because they could not be encoded.")
	descFilesClosed = desc("files_closed_total",
		"Files closed since start, by the reason that closed them (records, bytes, age, pressure, open_files, revoke, shutdown, schema: a record of another registry schema). Many pressure or open_files closes mean the budget is too small for the load.",
		"reason")
	descCommittedOffset = desc("committed_offset",
		"Offset committed to Kafka per partition: the next offset to consume. Everything below it is durable in storage. Compare with the partition's end offset for lag.",
		"topic", "partition")

	descLag = desc("partition_lag_records",
		"Records of an assigned partition not yet committed: its end offset (as the last fetch saw it, or as listed every few seconds while fetching is paused) minus the committed offset. Growing lag means Spillway falls behind.",
		"topic", "partition")
	descHighWatermark = desc("partition_high_watermark",
		"End offset of an assigned partition as the last fetch saw it, or as listed every few seconds while fetching is paused.",
		"topic", "partition")
	descLagTotal = desc("lag_records",
		"Sum of spillway_partition_lag_records over the assigned partitions.")
	descAssigned = desc("assigned_partitions",
		"Partitions assigned to this instance by the consumer group.")
	descPauses = desc("fetch_pauses_total",
		"Times fetching was paused by back pressure since start.")
	descPausedSeconds = desc("fetch_paused_seconds_total",
		"Seconds fetching spent paused by back pressure since start; its rate is the fraction of time paused.")
	descBudgetHigh = desc("budget_high_watermark_bytes",
		"The budget's high watermark: above it fetching pauses. Used bytes pinned here mean storage can't keep up.")
	descStalled = desc("stalled",
		"1 while the pipeline is stalled (no record written, file stored or offset committed for admin.stall_timeout while it lags, the budget not full): /healthz fails. Else 0.")
	descLastProgress = desc("last_progress_age_seconds",
		"Seconds since the pipeline last progressed or had nothing to do.")
	descReady = desc("ready",
		"1 when /readyz answers 200: in the group with its assignment and the brokers reachable. Else 0.")
	descBuildInfo = desc("build_info",
		"Always 1; the version label is Spillway's version.",
		"version")

	allDescs = []*prometheus.Desc{
		descLag, descHighWatermark, descLagTotal, descAssigned, descPauses, descPausedSeconds,
		descBudgetHigh, descStalled, descLastProgress, descReady, descBuildInfo,
		descBudgetLimit, descBudgetUsed, descBudgetPeak, descBudgetHeld, descBudgetUnreservedPeak,
		descDiskLimit, descDiskUsed, descDiskPeak, descDiskHigh, descDiskHeld, descSpoolFaults,
		descRegistryFetched, descRegistryUnknown, descRegistryFailed, descRegistryWaiting, descRegistryUndeclared,
		descBufferedRecords, descFetchPaused, descPausedPartitions,
		descOpenFiles, descUploadsInFlight,
		descFilesUploaded, descBytesUploaded,
		descRecordsWritten, descRecordsSkipped, descRecordsDeadLettered, descRecordsLost,
		descFilesClosed, descCommittedOffset,
	}
)

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It takes one snapshot, so the
// values of one scrape are consistent with each other as far as the Source
// makes them so.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}

	gauge(descBudgetLimit, float64(st.BudgetLimitBytes))
	gauge(descBudgetUsed, float64(st.BudgetUsedBytes))
	gauge(descBudgetPeak, float64(st.BudgetPeakBytes))
	for holder, n := range st.BudgetHeldBytes {
		gauge(descBudgetHeld, float64(n), holder)
	}
	gauge(descBudgetUnreservedPeak, float64(st.BudgetUnreservedPeakBytes))
	gauge(descDiskLimit, float64(st.DiskLimitBytes))
	gauge(descDiskUsed, float64(st.DiskUsedBytes))
	gauge(descDiskPeak, float64(st.DiskPeakBytes))
	gauge(descDiskHigh, float64(st.DiskHighBytes))
	for holder, n := range st.DiskHeldBytes {
		gauge(descDiskHeld, float64(n), holder)
	}
	counter(descSpoolFaults, float64(st.SpoolFaults))
	// Served without a registry too, as zeros, which they are: the
	// alert rules and dashboards then need no case for it.
	var reg RegistryStatus
	if st.SchemaRegistry != nil {
		reg = *st.SchemaRegistry
	}
	counter(descRegistryFetched, float64(reg.SchemasFetched))
	counter(descRegistryUnknown, float64(reg.UnknownIDs))
	counter(descRegistryFailed, float64(reg.FailedTries))
	gauge(descRegistryWaiting, b2f(reg.Waiting))
	counter(descRegistryUndeclared, float64(reg.Undeclared))
	gauge(descBufferedRecords, float64(st.BufferedRecords))
	paused := 0.0
	if st.FetchPaused {
		paused = 1
	}
	gauge(descFetchPaused, paused)
	gauge(descPausedPartitions, float64(st.PausedPartitions))
	gauge(descOpenFiles, float64(st.OpenFiles))
	gauge(descUploadsInFlight, float64(st.UploadsInFlight))

	counter(descFilesUploaded, float64(st.FilesUploaded))
	counter(descBytesUploaded, float64(st.BytesUploaded))
	counter(descRecordsWritten, float64(st.RecordsWritten))
	counter(descRecordsSkipped, float64(st.RecordsSkipped))
	counter(descRecordsDeadLettered, float64(st.RecordsDeadLettered))
	// Served at zero before any loss, so an alert needs no absent() case.
	counter(descRecordsLost, float64(st.RecordsLost["retention"]), "retention")
	for reason, n := range st.FilesClosed {
		counter(descFilesClosed, float64(n), reason)
	}
	for _, p := range st.Partitions {
		part := strconv.FormatInt(int64(p.Partition), 10)
		gauge(descLag, float64(p.Lag), p.Topic, part)
		if p.HighWatermark >= 0 {
			gauge(descHighWatermark, float64(p.HighWatermark), p.Topic, part)
		}
	}
	gauge(descLagTotal, float64(st.LagRecords))
	gauge(descAssigned, float64(len(st.Partitions)))
	counter(descPauses, float64(st.Pauses))
	counter(descPausedSeconds, st.PausedSeconds)
	gauge(descBudgetHigh, float64(st.BudgetHighBytes))
	gauge(descStalled, b2f(st.Stalled))
	gauge(descLastProgress, st.LastProgressSeconds)
	gauge(descReady, b2f(st.Ready && st.FatalError == ""))
	version := st.Version
	if version == "" {
		version = "unknown"
	}
	gauge(descBuildInfo, 1, version)
	for topic, parts := range st.CommittedOffsets {
		for p, off := range parts {
			gauge(descCommittedOffset, float64(off), topic, strconv.FormatInt(int64(p), 10))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
