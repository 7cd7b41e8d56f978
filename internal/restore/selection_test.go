package restore

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// TestSelection restores parts of one stored topic: a partition, an
// offset range, a time range, with the offset header; and checks the dry
// run and a DST without enough partitions.
func TestSelection(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 1)
	f := newSource(t, cluster, "src-sel", 3, 194, func(c *config.Config) { c.Format.Type, c.Format.Compression = "parquet", "gzip" })
	only := func(keep func(p int32, off int64, r *kgo.Record) bool) map[int32][]*kgo.Record {
		out := map[int32][]*kgo.Record{}
		for p, rs := range f.want {
			for off, r := range rs {
				if keep(p, int64(off), r) {
					out[p] = append(out[p], r)
				}
			}
		}
		return out
	}

	t.Run("partition and offsets with header", func(t *testing.T) {
		t.Parallel()
		createTopic(t, f.cl, "dst-sel-1", 3)
		_, err := f.restoreTo(t, "dst-sel-1", Options{Selection: Selection{Partitions: []int32{1}, FromOffset: 50, ToOffset: 120}, OffsetHeader: "src-offset"})
		if err != nil {
			t.Fatal(err)
		}
		got := readCommitted(t, cluster, "dst-sel-1", 3)
		// The header is the last one: take it off, check it, compare the rest.
		for p, rs := range got {
			for i, r := range rs {
				h := r.Headers[len(r.Headers)-1]
				if h.Key != "src-offset" || string(h.Value) != strconv.Itoa(50+i) {
					t.Fatalf("partition %d record %d: last header %q=%q, want src-offset=%d", p, i, h.Key, h.Value, 50+i)
				}
				r.Headers = r.Headers[:len(r.Headers)-1]
				if len(r.Headers) == 0 {
					r.Headers = nil
				}
			}
		}
		compare(t, only(func(p int32, off int64, _ *kgo.Record) bool { return p == 1 && off >= 50 && off < 120 }), got)
	})
	t.Run("time range", func(t *testing.T) {
		t.Parallel()
		createTopic(t, f.cl, "dst-sel-2", 3)
		from, to := int64(631152000000-100_000), int64(631152000000+50_000)
		_, err := f.restoreTo(t, "dst-sel-2", Options{Selection: Selection{FromTime: from, ToTime: to}})
		if err != nil {
			t.Fatal(err)
		}
		want := only(func(_ int32, _ int64, r *kgo.Record) bool {
			ts := r.Timestamp.UnixMilli()
			return ts >= from && ts < to
		})
		if len(want[0]) == 0 || len(want[0]) == len(f.want[0]) {
			t.Fatalf("the time range selects %d of %d records: not a test", len(want[0]), len(f.want[0]))
		}
		compare(t, want, readCommitted(t, cluster, "dst-sel-2", 3))
	})
	t.Run("dst too small", func(t *testing.T) {
		t.Parallel()
		createTopic(t, f.cl, "dst-sel-3", 2)
		_, err := f.restoreTo(t, "dst-sel-3", Options{})
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "dst-sel-3 has 2 partitions") || !strings.Contains(err.Error(), "at least 3") {
			t.Fatalf("got %v, want a UsageError saying dst-sel-3 has 2 partitions and needs 3", err)
		}
		// Restoring only what fits is fine.
		if _, err := f.restoreTo(t, "dst-sel-3", Options{Selection: Selection{Partitions: []int32{0, 1}}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("dst missing", func(t *testing.T) {
		t.Parallel()
		_, err := f.restoreTo(t, "dst-sel-none", Options{})
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "dst-sel-none does not exist") {
			t.Fatalf("got %v, want a UsageError saying dst-sel-none does not exist", err)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		b := openBucket(t, f.cfg)
		sel := Selection{Partitions: []int32{2}}
		plan, err := Plan(ctx, b, f.cfg.Storage.Prefix, map[string]string{f.topic: "x"}, sel)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := WriteDryRun(&out, plan, sel); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "src-sel/2 -> x/2: 2 files, offsets [0,194), 194 records") || strings.Contains(out.String(), "src-sel/0") {
			t.Fatalf("dry run:\n%s", out.String())
		}
	})
}
