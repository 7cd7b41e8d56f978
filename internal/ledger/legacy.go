package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/readback"
	"github.com/spillway/spillway/internal/storage"
)

// Files written before the ledger existed resumed by reading the last file
// of a partition back. Resume still does so, through ResumeOptions.Legacy,
// for a partition that has no ledger yet.

// ErrNotListable means the name template does not put a partition's files
// under one listable prefix, so what storage holds for it can't be found.
var ErrNotListable = errors.New("file.name_template has a variable before {{start_offset}} other than {{topic}} and {{partition}}, so one partition's files can't be listed")

// LegacyStore is what reading a prefix written before the ledger needs.
type LegacyStore interface {
	Store
	RemoveAbandoned(ctx context.Context, prefix string, belongs func(key string) bool) error
}

// LegacyNextOffset returns one past the highest offset stored for a
// partition in files written before the ledger, and ok=false when storage
// holds none. It also removes what a writer that died left for the
// partition: call it only as its owner. It lists the partition's prefix,
// picks the file with the highest start offset, and reads that file alone;
// its records need an "offset" field.
func LegacyNextOffset(ctx context.Context, st LegacyStore, names naming.Names, topic string, partition int32) (next int64, ok bool, err error) {
	pp, exact := names.PartitionPrefix(topic, partition)
	if !exact {
		return 0, false, ErrNotListable
	}
	// A previous owner that died mid-write left temp files: they hold no
	// committed data, and this process owns the partition now.
	err = st.RemoveAbandoned(ctx, pp, func(key string) bool {
		_, ok := names.ParsePartition(key, topic, partition)
		return ok
	})
	if err != nil {
		return 0, false, err
	}
	lastKey, lastStart := "", int64(-1)
	err = st.List(ctx, pp, func(o storage.Object) error {
		if start, ok := names.ParsePartition(o.Key, topic, partition); ok && start > lastStart {
			lastKey, lastStart = o.Key, start
		}
		return nil
	})
	if err != nil || lastKey == "" {
		return 0, false, err
	}
	next = -1
	err = readback.Records(ctx, st, lastKey, names.ContentExts(lastKey), nil, func(r readback.Record) error {
		switch {
		case r.Err != nil:
			return fmt.Errorf("%s: record %d: %w", lastKey, r.Index, r.Err)
		case !r.HasOffset:
			return fmt.Errorf("%s: record %d has no offset field; reading it back needs format.fields to include offset", lastKey, r.Index)
		}
		next = max(next, r.Offset+1)
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	if next < 0 {
		return lastStart, true, nil
	}
	return next, true, nil
}
