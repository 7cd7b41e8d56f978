package admin

// RestoreStatus is a running `spillway restore`'s progress, in Status.Restore
// (nil for run): the totals and each source partition's row, for /status
// and the status page's restore section.
type RestoreStatus struct {
	RecordsPlanned   int64              `json:"records_planned"` // in the files left to read at start
	RecordsRead      int64              `json:"records_read"`
	RecordsDone      int64              `json:"records_done"` // produced and committed
	RecordsSkipped   int64              `json:"records_skipped"`
	BytesDone        int64              `json:"bytes_done"`
	RecordsLeft      int64              `json:"records_left"`
	RecordsPerSecond float64            `json:"records_per_second"` // read, mean since the start
	ETASeconds       float64            `json:"eta_seconds"`        // 0 when done or not known
	Transactions     int64              `json:"transactions"`       // committed
	Partitions       []RestorePartition `json:"partitions"`
}

// RestorePartition is one source partition of a restore.
type RestorePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	ToTopic   string `json:"to_topic"`
	// FromOffset and EndOffset are the source offsets restored,
	// FromOffset <= offset < EndOffset; NextOffset is the progress
	// committed, the next source offset to restore.
	FromOffset       int64   `json:"from_offset"`
	EndOffset        int64   `json:"end_offset"`
	NextOffset       int64   `json:"next_offset"`
	RecordsPlanned   int64   `json:"records_planned"`
	RecordsRead      int64   `json:"records_read"`
	RecordsDone      int64   `json:"records_done"`
	RecordsSkipped   int64   `json:"records_skipped"`
	BytesDone        int64   `json:"bytes_done"`
	RecordsPerSecond float64 `json:"records_per_second"`
	ETASeconds       float64 `json:"eta_seconds"`
	// Transaction is "none", "open" (records of the partition produced in
	// the open transaction) or "committing".
	Transaction string `json:"transaction"`
	Done        bool   `json:"done"`
}
