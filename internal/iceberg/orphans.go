package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// referenced lists the data files that any snapshot of tbl references,
// not only the current one: a file of an older snapshot is still read by
// time travel, and by a rollback, until the snapshot is expired.
func referenced(tbl *table.Table, fio iceio.IO) ([]string, error) {
	seenManifest := map[string]bool{}
	seen := map[string]bool{}
	var out []string
	for _, s := range tbl.Metadata().Snapshots() {
		mans, err := s.Manifests(fio)
		if err != nil {
			return nil, fmt.Errorf("snapshot %d: read its manifest list: %w", s.SnapshotID, err)
		}
		for _, m := range mans {
			if seenManifest[m.FilePath()] {
				continue
			}
			seenManifest[m.FilePath()] = true
			// Deleted entries too: the snapshot before the delete still
			// reads the file.
			for e, err := range m.Entries(fio, false) {
				if err != nil {
					return nil, fmt.Errorf("snapshot %d: read manifest %s: %w", s.SnapshotID, m.FilePath(), err)
				}
				p := e.DataFile().FilePath()
				if !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
			}
		}
	}
	return out, nil
}

// FileInfo is what RemoveOrphan reads of a file before removing it.
type FileInfo struct {
	Bytes    int64
	Modified time.Time
}

// StatFile reads the size and modification time of the file at loc
// through the table's FileIO: the same the table's readers use.
func (t *Table) StatFile(ctx context.Context, loc string) (FileInfo, error) {
	fio, err := t.fileIO(ctx)
	if err != nil {
		return FileInfo{}, err
	}
	var fi fs.FileInfo
	if st, ok := fio.(interface {
		Stat(string) (fs.FileInfo, error)
	}); ok {
		fi, err = st.Stat(loc)
	} else {
		var f iceio.File
		if f, err = fio.Open(loc); err == nil {
			fi, err = f.Stat()
			_ = f.Close()
		}
	}
	if err != nil {
		return FileInfo{}, fmt.Errorf("iceberg: %s: stat %s: %w", t.name, loc, t.c.scrub(err))
	}
	return FileInfo{Bytes: fi.Size(), Modified: fi.ModTime()}, nil
}

// RemoveFile removes the file at loc through the table's FileIO. The
// caller decides that no ledger entry and no snapshot names it.
func (t *Table) RemoveFile(ctx context.Context, loc string) error {
	fio, err := t.fileIO(ctx)
	if err != nil {
		return err
	}
	if err := fio.Remove(loc); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("iceberg: %s: remove %s: %w", t.name, loc, t.c.scrub(err))
	}
	return nil
}

// fileIO is the FileIO of the table, loaded afresh, or of its location
// when it does not exist.
func (t *Table) fileIO(ctx context.Context) (iceio.IO, error) {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, err
	}
	var fio iceio.IO
	if tbl != nil {
		fio, err = tbl.FS(ctx)
	} else {
		fio, err = iceio.LoadFS(ctx, t.c.props, t.Location())
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	return literalIO{fio}, nil // the file the ledger names (ioLocation)
}
