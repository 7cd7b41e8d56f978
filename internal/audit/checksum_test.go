package audit

import (
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/testkit/datafiles"

	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScanDeepChecksum: one byte of a stored uncompressed jsonl file
// changed, its size and every record still valid (issue #22, case 8). Only
// the checksum its entry records tells; the problem names the file, both
// checksums and the fix.
func TestScanDeepChecksum(t *testing.T) {
	f := newScanFixture(t)
	a := f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 4}}, true)
	f.entry(offsets.State{Next: 4}, offsets.Ranges{{4, 8}}, true)
	_, ps := f.scan(&DeepOptions{OffsetField: true})
	wantKinds(t, ps.Problems)
	if ps.Deep.Files != 2 || ps.Deep.Records != 8 || len(ps.Deep.NotChecked) != 0 {
		t.Errorf("deep %+v", ps.Deep)
	}

	p := filepath.Join(f.dir, filepath.FromSlash(a.File.Key))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), `"n":2,`)
	if i < 0 {
		t.Fatalf("%s: no record 2 in %q", a.File.Key, data)
	}
	data[i+len(`"n":`)] = '3'
	datafiles.Put(t, f.dir, a.File.Key, data)
	found := f.sum(a.File.Key)

	// Without --deep it is out of sight: the size is right.
	_, ps = f.scan(nil)
	wantKinds(t, ps.Problems)
	_, ps = f.scan(&DeepOptions{OffsetField: true})
	wantKinds(t, ps.Problems, "checksum_mismatch "+a.File.Key)
	for _, p := range ps.Problems {
		for _, want := range []string{a.File.Key, "CRC-32C is " + found, "Spillway wrote " + a.File.CRC32C, "restore it from a backup"} {
			if !strings.Contains(p.Message, want) {
				t.Errorf("message %q, want %q in it", p.Message, want)
			}
		}
		if p.Entry != f.ledger.EntryKey(f.id, a.Seq) {
			t.Errorf("problem %+v, want its ledger entry", p)
		}
	}

	// A bytes file can't be read back record by record, but its bytes
	// are summed all the same: the records' reader never reads them,
	// and closing it reads them for the sum.
	const bin = "data/t-0-8.bin"
	datafiles.Put(t, f.dir, bin, []byte("a\nb\nc\nd\n"))
	e := &ledger.Entry{Cluster: "c1", Topic: "t", TopicID: "id1", Seq: f.seq, Before: offsets.State{Next: 8},
		File: ledger.FileInfo{Key: bin, Ranges: offsets.Ranges{{8, 12}}, Records: 4, Bytes: 8, CRC32C: f.sum(bin)}}
	if err := f.ledger.Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	data[i+len(`"n":`)] = '2' // a as it was
	datafiles.Put(t, f.dir, a.File.Key, data)
	_, ps = f.scan(&DeepOptions{OffsetField: true})
	wantKinds(t, ps.Problems)
	if len(ps.Deep.NotChecked) != 1 || ps.Deep.NotChecked[0].Example != bin {
		t.Errorf("not checked %+v, want the bytes file's records only", ps.Deep.NotChecked)
	}
	datafiles.Put(t, f.dir, bin, []byte("a\nb\nC\nd\n"))
	_, ps = f.scan(&DeepOptions{OffsetField: true})
	wantKinds(t, ps.Problems, "checksum_mismatch "+bin)
}

// TestScanDeepNoChecksum: entries written before file.crc32c are checked
// as before (size, records), clean, and the report says once, for all
// their files, that their bytes were not summed.
func TestScanDeepNoChecksum(t *testing.T) {
	f := newScanFixture(t)
	f.noSum = true
	a := f.entry(offsets.State{Next: 0}, offsets.Ranges{{0, 4}}, true)
	f.entry(offsets.State{Next: 4}, offsets.Ranges{{4, 8}}, true)
	f.noSum = false
	f.entry(offsets.State{Next: 8}, offsets.Ranges{{8, 12}}, true)
	_, ps := f.scan(&DeepOptions{OffsetField: true})
	wantKinds(t, ps.Problems)
	if ps.Deep.Files != 3 || ps.Deep.Records != 12 || len(ps.Deep.NotChecked) != 1 {
		t.Fatalf("deep %+v, want 3 files read and one note", ps.Deep)
	}
	if n := ps.Deep.NotChecked[0]; n.Why != notSummed || n.Files != 2 || n.Example != a.File.Key {
		t.Errorf("not checked %+v, want the two files without a checksum", n)
	}
}

// TestEntryChecksumInvalid: an entry whose crc32c isn't one is corrupt, as
// any field that can't have been written.
func TestEntryChecksumInvalid(t *testing.T) {
	f := newScanFixture(t)
	e := &ledger.Entry{Cluster: "c1", Topic: "t", TopicID: "id1", Seq: 0,
		File: ledger.FileInfo{Key: "data/t-0-0.jsonl", Ranges: offsets.Ranges{{0, 1}}, Records: 1, Bytes: 10, CRC32C: "ABCD0123"}}
	if err := f.ledger.Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	_, err := f.ledger.Read(context.Background(), f.id, f.ledger.EntryKey(f.id, 0))
	var ce *ledger.CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "crc32c") {
		t.Errorf("read: %v, want a corrupt entry naming file.crc32c", err)
	}
}
