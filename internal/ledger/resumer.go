package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/storage"
)

// ResumerOptions say how Resumer treats files that no ledger entry names.
type ResumerOptions struct {
	ResumeOptions // Legacy is set by Resumer from EarlierFiles
	// EarlierFiles is storage.earlier_files: "spillway" reads back the
	// files of an earlier version, "none" only reports them, "foreign"
	// leaves them to the group's commit.
	EarlierFiles string
	// Readable says that an earlier version's files can be read back for
	// their offsets: jsonl or json with offset in format.fields.
	Readable bool
	// Log is told of a stray file under EarlierFiles "none".
	Log *slog.Logger
}

// Resumer returns the func that reads where a partition stands from the
// ledger, with the signature of source.Resumer. Files that no ledger entry
// names never move a resume point, unless the user asked by name
// (storage.earlier_files: spillway) to read back the files of an earlier
// version, which resumed from its last file: that is still done where it
// worked (a template that lists one partition's files, with offset in
// format.fields), and where it can't be, such files stop the run. With the
// default (none), a partition without a ledger starts at the group's
// commit, and a file named like one of its own is only reported.
func Resumer(l *Ledger, st LegacyStore, names naming.Names, o ResumerOptions) func(ctx context.Context, id Identity, log Log) (Point, error) {
	_, listable := names.PartitionPrefix("t", 0)
	readable := listable && o.Readable
	stray := func(ctx context.Context, topic string, partition int32) (string, error) {
		if !listable {
			return "", nil
		}
		pp, _ := names.PartitionPrefix(topic, partition)
		found := ""
		err := st.List(ctx, pp, func(obj storage.Object) error {
			if _, ok := names.ParsePartition(obj.Key, topic, partition); ok {
				found = obj.Key
				return errFound
			}
			return nil
		})
		if errors.Is(err, errFound) {
			err = nil
		}
		return found, err
	}
	opts := o.ResumeOptions
	opts.Legacy = nil
	switch o.EarlierFiles {
	case "spillway":
		opts.Legacy = func(ctx context.Context, topic string, partition int32) (int64, bool, error) {
			if readable {
				return LegacyNextOffset(ctx, st, names, topic, partition)
			}
			found, err := stray(ctx, topic, partition)
			if err == nil && found != "" {
				err = fmt.Errorf("%s is stored without a ledger entry, and its records can't be read back to find their offsets (format.fields has no offset, or the format is not jsonl or json)", found)
			}
			return 0, false, err
		}
	case "none":
		opts.Legacy = func(ctx context.Context, topic string, partition int32) (int64, bool, error) {
			found, err := stray(ctx, topic, partition)
			if err == nil && found != "" {
				o.Log.Warn("a file named like one of this partition's is stored, but no ledger entry names it: Spillway did not write it (or wrote it before the ledger), so it does not move where the partition resumes; verify reports it. Move it out of storage.prefix, or set storage.earlier_files: spillway to read back an earlier version's files, or foreign for Kafka Connect's",
					"topic", topic, "partition", partition, "file", found)
			}
			return 0, false, err
		}
	}
	// foreign: another writer's files (Kafka Connect's, before the
	// cut-over): the group's commit says where they end.
	return func(ctx context.Context, id Identity, log Log) (Point, error) {
		// A previous owner that died mid-write left temp files (on a
		// local directory): they hold nothing published, and this process
		// owns the partition now. Every name carries the topic and
		// partition, so its files are told apart from other partitions'
		// under the widest prefix too (a template that isn't listable per
		// partition).
		pp, _ := names.PartitionPrefix(id.Topic, id.Partition)
		err := st.RemoveAbandoned(ctx, pp, func(key string) bool {
			_, ok := names.ParsePartition(key, id.Topic, id.Partition)
			return ok
		})
		if err != nil {
			return Point{}, err
		}
		p, err := l.Resume(ctx, id, log, opts)
		if err != nil {
			return p, err
		}
		// And what it left of the ledger entry it was writing.
		for _, dir := range l.EntryDirs(id, p.Seq) {
			if err := st.RemoveAbandoned(ctx, dir, func(string) bool { return true }); err != nil {
				return Point{}, err
			}
		}
		return p, nil
	}
}

var errFound = errors.New("found")
