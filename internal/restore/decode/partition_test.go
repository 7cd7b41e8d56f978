package decode

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/datafiles"
)

// TestFilesWithPartition: files whose format.fields list partition (as an
// Iceberg table's do) decode to their records in every format restore
// reads, jsonl through the fast path.
func TestFilesWithPartition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := datafiles.OpenDir(t, dir)
	for _, typ := range []string{"jsonl", "avro", "parquet"} {
		cfg := config.Default().Format
		cfg.Type, cfg.ValueEncoding, cfg.Compression = typ, "base64", "none"
		cfg.Fields = []string{"key", "value", "offset", "timestamp", "headers", "partition"}
		var buf bytes.Buffer
		enc, err := formats.NewEncoder(cfg, &buf)
		if err != nil {
			t.Fatal(err)
		}
		var want []*kgo.Record
		for i := range 20 {
			r := testkit.HostileRecord(i, 0)
			r.Offset, r.Partition = int64(i), 6
			want = append(want, r)
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if typ == "jsonl" {
			line, _, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
			if _, err := parseEnvelope(line); err != nil || !bytes.Contains(line, []byte(`"partition":6`)) {
				t.Errorf("the fast path refuses %s: %v", line, err)
			}
		}
		key := "t-6-0" + naming.Extension(typ, "none")
		datafiles.Put(t, dir, key, buf.Bytes())
		_, exts := naming.SplitExt(key)
		n := 0
		err = File(context.Background(), b, key, exts, 64<<10, func(r *kgo.Record) error {
			if err := testkit.SameRecord(want[n], r); err != nil || r.Offset != want[n].Offset {
				t.Errorf("%s record %d: %v (offset %d)", typ, n, err, r.Offset)
			}
			n++
			return nil
		})
		if err != nil || n != len(want) {
			t.Errorf("%s: %d records, %v; want %d", typ, n, err, len(want))
		}
	}
}
