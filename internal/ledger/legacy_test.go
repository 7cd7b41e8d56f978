package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/testkit/datafiles"
)

// TestLegacyNextOffset resumes a prefix written before the ledger: one past
// the highest offset of the partition's last file, which alone is read,
// and the temp files a dead writer of the partition left are removed.
func TestLegacyNextOffset(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := datafiles.OpenDir(t, dir)
	names, err := naming.NewNames("raw/", "{{topic}}-{{partition}}-{{start_offset}}", ".jsonl.zst")
	if err != nil {
		t.Fatal(err)
	}
	// The first file isn't readable: only the last one may be read.
	datafiles.Put(t, dir, "raw/t-0-0.jsonl", []byte("not json\n"))
	datafiles.Write(t, dir, "raw/t-0-3.jsonl.zst", "jsonl", "zstd", 3, 4, 7)
	datafiles.Write(t, dir, "raw/t-1-0.jsonl.zst", "jsonl", "zstd", 0, 1)
	datafiles.Write(t, dir, "raw/t-10-50.jsonl.zst", "jsonl", "zstd", 50)
	datafiles.Put(t, dir, "raw/.spillway-tmp-t-0-8.jsonl.zst.123", []byte("partial"))
	datafiles.Put(t, dir, "raw/.spillway-tmp-u-0-8.jsonl.zst.456", []byte("another topic's"))

	for _, tc := range []struct {
		p    int32
		next int64
		ok   bool
	}{{0, 8, true}, {1, 2, true}, {10, 51, true}, {2, 0, false}} {
		next, ok, err := LegacyNextOffset(ctx, b, names, "t", tc.p)
		if err != nil || next != tc.next || ok != tc.ok {
			t.Errorf("t/%d: %d, %v, %v; want %d, %v", tc.p, next, ok, err, tc.next, tc.ok)
		}
	}
	var temps []string
	ents, err := os.ReadDir(filepath.Join(dir, "raw"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			temps = append(temps, e.Name())
		}
	}
	sort.Strings(temps)
	if strings.Join(temps, " ") != ".spillway-tmp-u-0-8.jsonl.zst.456" {
		t.Errorf("temp files left: %v; want only the other topic's", temps)
	}

	datafiles.Put(t, dir, "raw/v-0-0.jsonl", []byte("{\"value\":1}\n"))
	if _, _, err := LegacyNextOffset(ctx, b, names, "v", 0); err == nil || !strings.Contains(err.Error(), "no offset field") || !strings.Contains(err.Error(), "raw/v-0-0.jsonl") {
		t.Errorf("a last file without offsets: %v", err)
	}

	timed, err := naming.NewNames("", "{{topic}}/{{timestamp:unit=yyyy}}/{{partition}}-{{start_offset}}", ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := LegacyNextOffset(ctx, b, timed, "t", 0); !errors.Is(err, ErrNotListable) {
		t.Errorf("a template that can't list one partition: %v, want ErrNotListable", err)
	}
}
