// Package offsets says which offsets of a partition are durable: what
// storage holds or will never hold, as sorted runs of offsets (Ranges), a
// partition's handled State, the Gaps it passed without storing, and the
// Tracker from which offset commits and ledger entries are taken. It
// reads and writes nothing itself: the ledger persists what it says, the
// sink feeds it, the source commits from it.
package offsets

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Closed describes a file the sink closed, for OnClose.
type Closed struct {
	Key       string
	Partition TopicPartition
	Reason    Reason
	Records   int64
}

// Reason says why a file was closed.
type Reason string

// Rotation reasons, as counted in metrics.
const (
	ReasonRecords   Reason = "records"
	ReasonBytes     Reason = "bytes"
	ReasonAge       Reason = "age"
	ReasonPressure  Reason = "pressure"
	ReasonOpenFiles Reason = "open_files"
	ReasonRevoke    Reason = "revoke"
	ReasonShutdown  Reason = "shutdown"
	// ReasonSchema: the partition's next record has other registry schemas
	// than its open file, whose columns are those of its first record.
	ReasonSchema Reason = "schema"
)

// Reasons lists every Reason, in the order status pages show them.
var Reasons = []Reason{ReasonRecords, ReasonBytes, ReasonAge, ReasonPressure,
	ReasonOpenFiles, ReasonRevoke, ReasonShutdown, ReasonSchema}
