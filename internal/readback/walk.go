package readback

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro/ocf"
)

// The walkers below frame a file's records, one per call of fn, and leave
// the record's meaning to the caller: verify reads only each record's
// offset from them, restore the whole record. A file that ends where no
// record may end, or whose framing is broken, is a *ReadError naming the
// file and the record where it broke.

// JSONLines calls fn with the line of each record of a jsonl file, or of a
// json file (array: the lines between a line "[" and a line "]", each
// without its trailing comma). complete is false for a last line with no
// line break after it: the file was cut inside that record. bufSize sizes
// the read buffer; a longer line is gathered whole.
func JSONLines(ctx context.Context, r io.Reader, key string, array bool, bufSize int, fn func(n int64, line []byte, complete bool) error) error {
	br := bufio.NewReaderSize(r, bufSize)
	var long []byte // a line longer than br's buffer, gathered
	var n int64
	opened, closed := false, false
	for {
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return &ReadError{Key: key, Record: n, Err: err}
		}
		eof := err != nil
		if eof && len(line) == 0 {
			break
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if array {
			switch {
			case closed:
				return &ReadError{Key: key, Record: n, Err: errors.New(`data after the closing "]"`)}
			case !opened && string(line) == "[]":
				opened, closed = true, true
				continue
			case !opened:
				if string(line) != "[" {
					return &ReadError{Key: key, Record: n, Err: errors.New(`a json file starts with a line "["`)}
				}
				opened = true
				continue
			case string(line) == "]":
				closed = true
				continue
			}
			line = bytes.TrimSuffix(line, []byte(","))
		}
		if err := fn(n, line, !eof); err != nil {
			return err
		}
		n++
		if eof {
			break
		}
	}
	if array && !closed {
		return &ReadError{Key: key, Record: n, Err: errors.New(`the file ends before its closing "]": it is truncated`)}
	}
	return nil
}

// maxAvroBlock is the largest block a reader takes. Spillway writes a
// record larger than a block as a block of its own, and Kafka's records go
// up to its message.max.bytes, which operators raise: the reader's default
// (64 MiB) would call such a file corrupt.
const maxAvroBlock = 1 << 30

// AvroDatums calls fn with each datum of an Avro Object Container File,
// read with twmb/avro as generic values. A block that can't be read (a bad
// sync marker, a codec error, a datum that doesn't match the schema)
// breaks the file from there on: OCF has no way to find the next block but
// its sync marker, which a damaged length hides.
func AvroDatums(ctx context.Context, r io.Reader, key string, fn func(n int64, datum any) error) error {
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
		if err := fn(n, datum); err != nil {
			return err
		}
	}
}

// ParquetRows calls open once with the file, to find its columns, then fn
// with each row; a row's values are only valid during the call. The footer
// comes last, so the file is first copied to a temporary file, not held in
// memory. A page that can't be read breaks its row group and the rest of
// the file, and a file whose footer counts more rows than could be read is
// cut short (parquet-go stops at what it reads).
func ParquetRows(ctx context.Context, r io.Reader, key string, open func(*parquet.File) error, fn func(n int64, row parquet.Row) error) error {
	tmp, err := os.CreateTemp("", "spillway-readback-*.parquet")
	if err != nil {
		return fmt.Errorf("read back %s: %w", key, err)
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
	if err := open(f); err != nil {
		return err
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
			if err := fn(n, row); err != nil {
				return err
			}
			n++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &ReadError{Key: key, Record: n, Err: err}
		}
	}
	if n != f.NumRows() {
		return &ReadError{Key: key, Record: n, Err: fmt.Errorf("the footer says %d rows, %d could be read", f.NumRows(), n)}
	}
	return nil
}
