// Package tables commits the data files Spillway stores to Apache Iceberg
// tables, exactly once. It knows a table only as Table (what the current
// snapshot holds, and a commit of more files), which package iceberg's
// catalog provides through OpenCatalog; the files, their offsets and
// their order come from the ledger.
//
// The ledger is the truth. The sink tells the Committer of each file once
// it is stored and its ledger entry written (sink.Config.Published); the
// Committer commits them per table, each partition's in ledger order, at
// iceberg.commit_interval or earlier by volume. On each assignment of a
// partition it first catches up from the ledger: the entries past what the
// table's snapshot holds (Table.Next) are committed before any newer file.
// Since a partition's files enter the table in ledger order only, the
// table always holds a prefix of each partition's ledger, and Next says
// where that prefix ends: the ledger seq of its last file.
// So a crash anywhere (after a file's upload and before its commit,
// during a commit, after a commit and before the Kafka offset commit)
// ends, at the next assignment, with every stored file in the table once.
package tables

import (
	"context"
	"errors"
	"strings"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
)

// File is one data file to commit: package iceberg's File.
//
// First and End are the partition's offsets handled before and after the
// file, in ledger order (the entry's Before.Next and After().Next), not
// the file's lowest and highest offset: a partition split by time (one
// open file per day) interleaves its files' offsets, and only these
// bounds grow with the ledger order. They may repeat (consecutive files
// with one End), so which files a table holds is told by Seq, the
// entry's ledger sequence number. The file's exact offsets are in its
// ledger entry.
type File struct {
	Location       string // full URI
	Topic          string
	TopicID        string // the topic's Kafka id, from the ledger entry
	Partition      int32
	First, End     int64
	Seq            int64
	Records, Bytes int64
}

// Table is one Iceberg table, as the Committer uses it.
type Table interface {
	// Held returns, per partition of topic, the ledger seq of the last
	// file the current snapshot holds; a partition it holds nothing of is
	// absent, and so is every partition when the table holds another
	// incarnation of the topic than topicID (deleted and recreated).
	Held(ctx context.Context, topic, topicID string) (map[int32]int64, error)
	// Commit adds files in one snapshot, skipping those (by Seq) the
	// table holds already, and records in the snapshot's summary what it
	// makes visible. It retries conflicts itself. An error wrapping
	// ErrPermanent can't pass by retrying; any other may.
	Commit(ctx context.Context, files []File) error
}

// Catalog opens tables by name ("namespace.table", {{topic}} rendered).
type Catalog interface {
	// Location is where the catalog puts table name.
	Location(name string) string
	Table(ctx context.Context, name string) (Table, error)
}

// ErrPermanent marks a catalog or table error that retrying can't cure:
// refused credentials, a table that is gone while iceberg.auto_create is
// off, a schema the table can't take. It stops the run.
var ErrPermanent = errors.New("permanent")

// Ledger is what catching up reads of the ledger (ledger.Ledger).
type Ledger interface {
	Last(ctx context.Context, id ledger.Identity) (*ledger.Entry, error)
	Read(ctx context.Context, id ledger.Identity, key string) (*ledger.Entry, error)
	EntryKey(id ledger.Identity, seq int64) string
	Stored(ctx context.Context, e *ledger.Entry) (bool, error)
}

// TableName renders iceberg.table for topic, as package iceberg names it
// (iceberg.Options.Name): a dot in the topic becomes "_", since dots
// separate namespace levels.
func TableName(table, topic string) string {
	return strings.ReplaceAll(table, "{{topic}}", naming.TableTopic(topic))
}

// fileOf is e's data file, stored at base+key.
func fileOf(base string, e *ledger.Entry) File {
	return File{
		Location: base + e.File.Key, Topic: e.Topic, TopicID: e.TopicID, Partition: e.Partition,
		First: e.Before.Next, End: e.After().Next, Seq: e.Seq, Records: e.File.Records, Bytes: e.File.Bytes,
	}
}
