package runner

import (
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// TestEndToEndColumnar drains the same 40k records, with keys, tombstones
// and headers, into avro and into parquet files compressed with zstd, and
// reads every file back: each offset is stored exactly once, values and
// headers are intact, and committed offsets equal end offsets.
func TestEndToEndColumnar(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 8, "events")
	cl := cluster.Client(t)
	const n = 40_000
	testkit.Produce(t, cl, "events", n, func(i int) *kgo.Record {
		r := &kgo.Record{Partition: int32(i % 8), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
		switch i % 10 {
		case 3:
			r.Value = nil // a tombstone
		case 7:
			r.Headers = []kgo.RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)}}
		}
		return r
	})
	end := testkit.EndOffsets(t, cl, "events")

	for _, typ := range []string{"avro", "parquet"} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(cluster.Addrs(), dir)
			cfg.Kafka.Group = "columnar-" + typ
			cfg.Format.Type = typ
			cfg.Format.Compression = "zstd"
			// Every file closes by count (4 of 1250 per partition's 5000),
			// none by age, however slow the machine: the file count below
			// holds.
			cfg.File.MaxRecords = 1250
			cfg.File.MaxAge = time.Hour
			_, stop := started(t, cfg)
			waitCommitted(t, cl, cfg.Kafka.Group, end)
			if err := stop(); err != nil {
				t.Fatalf("graceful stop: %v", err)
			}

			if err := testkit.WalkOutput(dir, func(path string) error {
				if filepath.Ext(path) != "."+typ {
					t.Errorf("%s: want the extension .%s alone (the codec is inside the file)", path, typ)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var recs []testkit.StoredRecord
			if typ == "avro" {
				recs = testkit.ReadAvro(t, dir)
			} else {
				recs = testkit.ReadParquet(t, dir)
			}
			testkit.AssertExactlyOnce(t, recs, "events", end)
			if got := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); !maps.Equal(got, end) {
				t.Errorf("after stop, committed %v, want end offsets %v", got, end)
			}
			files := map[string]bool{}
			var nulls, headers int
			for _, r := range recs {
				files[r.File] = true
				// Produced in order: record i went to partition i%8 at offset i/8.
				i := r.Offset*8 + int64(r.Partition)
				switch {
				case i%10 == 3:
					if string(r.Value) != "null" {
						t.Fatalf("%s/%d@%d: value %s, want null", r.Topic, r.Partition, r.Offset, r.Value)
					}
					nulls++
				case string(r.Value) != fmt.Sprintf(`"{\"i\":%d}"`, i) || string(r.Key) != fmt.Sprintf(`"k%d"`, i):
					t.Fatalf("%s/%d@%d: key %s value %s, want k%d and {\"i\":%d} as strings", r.Topic, r.Partition, r.Offset, r.Key, r.Value, i, i)
				}
				if i%10 == 7 {
					if len(r.Headers) != 1 || r.Headers[0]["key"] != "trace" || r.Headers[0]["value"] != fmt.Sprintf("t%d", i) {
						t.Fatalf("%s/%d@%d: headers %v", r.Topic, r.Partition, r.Offset, r.Headers)
					}
					headers++
				} else if len(r.Headers) != 0 {
					t.Fatalf("%s/%d@%d: headers %v, want none", r.Topic, r.Partition, r.Offset, r.Headers)
				}
			}
			if nulls != n/10 || headers != n/10 {
				t.Errorf("found %d null values and %d records with a header, want %d each", nulls, headers, n/10)
			}
			// max_records 1250 over 8 partitions of 5000 records: 4 files each.
			if len(files) != 32 {
				t.Errorf("%d files, want 4 per partition", len(files))
			}
			t.Logf("%d records in %d files", len(recs), len(files))
		})
	}
}
