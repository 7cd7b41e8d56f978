package readback

import (
	"context"
	"io"

	"github.com/parquet-go/parquet-go"
)

// readAvro reads an Avro OCF: each datum is one record, and a top-level
// "offset" long is its offset.
func readAvro(ctx context.Context, r io.Reader, key string, fn func(Record) error) error {
	return AvroDatums(ctx, r, key, func(n int64, datum any) error {
		rec := Record{Index: n}
		if m, ok := datum.(map[string]any); ok {
			rec.Offset, rec.HasOffset = m["offset"].(int64)
			rec.Partition, rec.HasPartition = m["partition"].(int32)
		}
		return fn(rec)
	})
}

// readParquet reads a Parquet file: a top-level int64 column "offset" is
// each row's offset, and a top-level int32 column "partition" its Kafka
// partition.
func readParquet(ctx context.Context, r io.Reader, key string, fn func(Record) error) error {
	offsetCol, partCol := -1, -1
	open := func(f *parquet.File) error {
		if leaf, ok := f.Schema().Lookup("offset"); ok && leaf.MaxRepetitionLevel == 0 && leaf.Node.Type().Kind() == parquet.Int64 {
			offsetCol = leaf.ColumnIndex
		}
		if leaf, ok := f.Schema().Lookup("partition"); ok && leaf.MaxRepetitionLevel == 0 && leaf.Node.Type().Kind() == parquet.Int32 {
			partCol = leaf.ColumnIndex
		}
		return nil
	}
	return ParquetRows(ctx, r, key, open, func(n int64, row parquet.Row) error {
		rec := Record{Index: n}
		for _, v := range row {
			switch {
			case v.IsNull():
			case v.Column() == offsetCol:
				rec.Offset, rec.HasOffset = v.Int64(), true
			case v.Column() == partCol:
				rec.Partition, rec.HasPartition = v.Int32(), true
			}
		}
		return fn(rec)
	})
}
