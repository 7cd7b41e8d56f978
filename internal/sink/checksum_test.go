package sink_test

import (
	"context"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// TestLedgerEntryChecksum: each file's ledger entry, written before the
// file is published, records the size and the CRC-32C of the bytes
// stored, compressed, as a later read of the file finds them.
func TestLedgerEntryChecksum(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bucket, err := storage.Open(ctx, "file://"+dir, storage.Options{PartSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	cfg := baseConfig(t)
	cfg.Extension = naming.Extension("jsonl", "zstd")
	cfg.NewCompressor = func(w io.Writer) (io.WriteCloser, error) { return format.NewCompressor("zstd", w) }
	cfg.MaxRecords = 100
	cfg.Ledger = ledger.New(bucket, "")
	s := sink.New(cfg, sink.FromStorage(bucket), budget.New(1<<30, 0), slog.New(slog.DiscardHandler))
	t.Cleanup(s.Close)
	id := ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0}
	s.Assign(tp("t", 0), id, ledger.Point{State: offsets.State{Next: 0}})
	var recs []*kgo.Record
	for o := range int64(250) {
		recs = append(recs, rec("t", 0, o))
	}
	if err := s.Write(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx, nil, offsets.ReasonShutdown); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = cfg.Ledger.Entries(ctx, id, func(key string, e *ledger.Entry, err error) error {
		if err != nil {
			return err
		}
		n++
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.File.Key)))
		if err != nil {
			return err
		}
		if sum := ledger.FormatCRC32C(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))); int64(len(data)) != e.File.Bytes || sum != e.File.CRC32C {
			t.Errorf("%s: %s holds %d bytes of CRC-32C %s, its entry says %d of %q", key, e.File.Key, len(data), sum, e.File.Bytes, e.File.CRC32C)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d ledger entries, want 3", n)
	}
}
