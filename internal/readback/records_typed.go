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
		}
		return fn(rec)
	})
}

// readParquet reads a Parquet file: a top-level int64 column "offset" is
// each row's offset.
func readParquet(ctx context.Context, r io.Reader, key string, fn func(Record) error) error {
	offsetCol := -1
	open := func(f *parquet.File) error {
		if leaf, ok := f.Schema().Lookup("offset"); ok && leaf.MaxRepetitionLevel == 0 && leaf.Node.Type().Kind() == parquet.Int64 {
			offsetCol = leaf.ColumnIndex
		}
		return nil
	}
	return ParquetRows(ctx, r, key, open, func(n int64, row parquet.Row) error {
		rec := Record{Index: n}
		if offsetCol >= 0 {
			for _, v := range row {
				if v.Column() == offsetCol && !v.IsNull() {
					rec.Offset, rec.HasOffset = v.Int64(), true
					break
				}
			}
		}
		return fn(rec)
	})
}
