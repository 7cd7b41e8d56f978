package maintain

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Referenced lists the data files that any snapshot of tbl references,
// not only the current one: a file of an older snapshot is still read by
// time travel, and by a rollback, until the snapshot is expired.
func Referenced(tbl *table.Table, fio iceio.IO) ([]string, error) {
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

// FileInfo is what Files.Stat reads of a file, for deciding whether an
// orphan is old enough to remove.
type FileInfo struct {
	Bytes    int64
	Modified time.Time
}

// Files are a table's files as its FileIO reads them, for removing
// orphans: one FileIO for a run over many orphans.
type Files struct {
	fio   iceio.IO
	name  string
	scrub func(error) error
}

// NewFiles returns the files fio reads, for the table name (said in
// errors). scrub hides credentials in a FileIO's error; nil leaves it as
// it is.
func NewFiles(fio iceio.IO, name string, scrub func(error) error) *Files {
	if scrub == nil {
		scrub = func(err error) error { return err }
	}
	return &Files{fio: fio, name: name, scrub: scrub}
}

// Stat reads the size and modification time of the file at loc through
// the table's FileIO: the same the table's readers use.
func (f *Files) Stat(loc string) (FileInfo, error) {
	var fi fs.FileInfo
	var err error
	if st, ok := f.fio.(interface {
		Stat(string) (fs.FileInfo, error)
	}); ok {
		fi, err = st.Stat(loc)
	} else {
		var file iceio.File
		if file, err = f.fio.Open(loc); err == nil {
			fi, err = file.Stat()
			_ = file.Close()
		}
	}
	if err != nil {
		return FileInfo{}, fmt.Errorf("iceberg: %s: stat %s: %w", f.name, loc, f.scrub(err))
	}
	return FileInfo{Bytes: fi.Size(), Modified: fi.ModTime()}, nil
}

// Remove removes the file at loc through the table's FileIO. The caller
// decides that no ledger entry and no snapshot names it.
func (f *Files) Remove(loc string) error {
	if err := f.fio.Remove(loc); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("iceberg: %s: remove %s: %w", f.name, loc, f.scrub(err))
	}
	return nil
}
