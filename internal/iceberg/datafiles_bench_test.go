package iceberg

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkDataFiles measures what registering a file costs beyond the
// catalog commit: reading its Parquet footer for the statistics and
// building its entry with the partition values (dataFiles), for 16 files
// of 40 records each, against one whole Commit of them.
//
// Up to 30 iterations (the records stay in one day):
//
//	go test -run '^$' -bench DataFiles -benchtime 20x ./internal/iceberg/
func BenchmarkDataFiles(b *testing.B) {
	o := sqlOptions("kafka.events")
	o.PartitionBy = []string{"partition", "day(timestamp)"}
	dir := b.TempDir()
	c, err := Open(context.Background(), o, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	tb, err := c.Table(context.Background(), "kafka.events")
	if err != nil {
		b.Fatal(err)
	}
	loc := tb.Location()
	var files []File
	for i := range 16 {
		f := envFile(b, loc, fmt.Sprintf("partition=%d/timestamp_day=2026-03-01/", i), int32(i), 0, 40, 0, 0)
		files = append(files, f)
	}
	ctx := context.Background()
	if err := tb.Commit(ctx, files[:1]); err != nil {
		b.Fatal(err)
	}
	tbl := tb.tbl
	b.Run("footers", func(b *testing.B) {
		for b.Loop() {
			if _, err := tb.dataFiles(ctx, tbl, files); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(files)), "µs/file")
	})
	b.Run("commit", func(b *testing.B) {
		first := int64(40)
		for b.Loop() {
			b.StopTimer()
			var next []File
			for i := range 16 {
				f := envFile(b, loc, fmt.Sprintf("partition=%d/timestamp_day=2026-03-01/", i), int32(i), first, first+40, 0, 0)
				f.Seq = first
				next = append(next, f)
			}
			first += 40
			b.StartTimer()
			if err := tb.Commit(ctx, next); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*16), "µs/file")
	})
}
