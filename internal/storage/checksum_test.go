package storage_test

import (
	"bytes"
	"context"
	"hash/crc32"
	"testing"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/storage/storagetest"
)

// TestWriterCRC32C: a writer sums what it is given, piece by piece, to the
// CRC-32C of the whole object, before Commit (when the sink's ledger entry
// records it) and as read back after, on the local backend and a gocloud
// one.
func TestWriterCRC32C(t *testing.T) {
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, url := range []string{"file://" + t.TempDir(), "mem://"} {
		b := storagetest.Open(t, url, storage.Options{PartSize: 4096})
		// The check value of CRC-32C (RFC 3720, B.4), in two pieces and
		// an empty one.
		w, err := b.NewWriter(context.Background(), "check", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"1234", "", "56789"} {
			if _, err := w.Write([]byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		if got := w.CRC32C(); got != 0xe3069283 {
			t.Errorf("%s: CRC32C of 123456789 = %08x, want e3069283", url, got)
		}
		w.Abort()

		w, err = b.NewWriter(context.Background(), "empty", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.CRC32C(); got != 0 {
			t.Errorf("%s: CRC32C of nothing = %08x, want 0", url, got)
		}
		w.Abort()

		// Pieces that straddle the part queue's chunks.
		data := storagetest.Payload(50_000)
		w, err = b.NewWriter(context.Background(), "a.jsonl", nil)
		if err != nil {
			t.Fatal(err)
		}
		storagetest.WriteChunks(t, w, data)
		sum := w.CRC32C()
		if want := crc32.Checksum(data, table); sum != want {
			t.Errorf("%s: CRC32C = %08x, want %08x", url, sum, want)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		back := storagetest.Read(t, b, "a.jsonl")
		if !bytes.Equal(back, data) || crc32.Checksum(back, table) != sum {
			t.Errorf("%s: read back %d bytes of CRC32C %08x, want %d of %08x", url, len(back), crc32.Checksum(back, table), len(data), sum)
		}
	}
}
