package readback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro/ocf"
)

// maxAvroBlock is the largest block the deep scan reads. Spillway writes a
// record larger than a block as a block of its own, and Kafka's records go
// up to its message.max.bytes, which operators raise: the reader's default
// (64 MiB) would call such a file corrupt.
const maxAvroBlock = 1 << 30

// readAvro reads an Avro Object Container File with twmb/avro's reader:
// each datum is one record, and a top-level "offset" long is its offset.
// A block that can't be read (a bad sync marker, a codec error, a datum
// that doesn't match the schema) breaks the file from there on: OCF has
// no way to find the next block but its sync marker, which a damaged
// length hides.
func readAvro(ctx context.Context, r io.Reader, key string, fn func(Record) error) error {
	rd, err := ocf.NewReader(r, ocf.WithMaxBlockBytes(maxAvroBlock), ocf.WithMaxDecompressedBlockBytes(maxAvroBlock))
	if err != nil {
		return &ReadError{Key: key, Err: fmt.Errorf("avro header: %w", err)}
	}
	defer rd.Close()
	for n := int64(0); ; n++ {
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		var datum any
		err := rd.Decode(&datum)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &ReadError{Key: key, Record: n, Err: err}
		}
		rec := Record{Index: n}
		if m, ok := datum.(map[string]any); ok {
			rec.Offset, rec.HasOffset = m["offset"].(int64)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

// readParquet reads a Parquet file with parquet-go's reader. The footer
// comes last, so the file is first copied to a temporary file, not held
// in memory. A top-level int64 column "offset" is each row's offset. A
// page that can't be read breaks its row group and the rest of the file.
func readParquet(ctx context.Context, r io.Reader, key string, fn func(Record) error) error {
	tmp, err := os.CreateTemp("", "spillway-verify-*.parquet")
	if err != nil {
		return fmt.Errorf("verify %s: %w", key, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	size, err := io.Copy(tmp, r)
	if err != nil {
		return &ReadError{Key: key, Err: err}
	}
	f, err := parquet.OpenFile(tmp, size)
	if err != nil {
		return &ReadError{Key: key, Err: fmt.Errorf("parquet footer: %w", err)}
	}
	offsetCol := -1
	if leaf, ok := f.Schema().Lookup("offset"); ok && leaf.MaxRepetitionLevel == 0 && leaf.Node.Type().Kind() == parquet.Int64 {
		offsetCol = leaf.ColumnIndex
	}
	pr := parquet.NewReader(f)
	defer pr.Close()
	rows := make([]parquet.Row, 64)
	var n int64
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		k, err := pr.ReadRows(rows)
		for _, row := range rows[:k] {
			rec := Record{Index: n}
			if offsetCol >= 0 {
				for _, v := range row {
					if v.Column() == offsetCol && !v.IsNull() {
						rec.Offset, rec.HasOffset = v.Int64(), true
						break
					}
				}
			}
			n++
			if err := fn(rec); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &ReadError{Key: key, Record: n, Err: err}
		}
	}
	// A file whose row groups say more rows than could be read is cut
	// short; parquet-go stops at what it reads.
	if n != f.NumRows() {
		return &ReadError{Key: key, Record: n, Err: fmt.Errorf("the footer says %d rows, %d could be read", f.NumRows(), n)}
	}
	return nil
}
