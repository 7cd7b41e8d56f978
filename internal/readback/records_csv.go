package readback

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// readCSV reads a csv file as Spillway writes it (RFC 4180 as Go's
// encoding/csv writes it, no header row, every row ending in a line
// break): one record per row of len(fields) columns, the column named
// offset holding its offset, the one named partition its Kafka partition.
//
// Rows are cut here, not by encoding/csv's reader, which skips empty lines:
// with one field, a null value is an empty line, and it is a record. A row
// ends at the first line break outside quotes; each row is then parsed
// alone, so a bad row is a record error and reading goes on.
func readCSV(ctx context.Context, r io.Reader, key string, fields []string, fn func(Record) error) error {
	offsetCol, partCol := slices.Index(fields, "offset"), slices.Index(fields, "partition")
	br := bufio.NewReaderSize(r, 256<<10)
	var row []byte
	quotes := 0
	for n := int64(0); ; {
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) && !errors.Is(err, io.EOF) {
			return &ReadError{Key: key, Record: n, Err: err}
		}
		row = append(row, line...)
		quotes += bytes.Count(line, []byte{'"'})
		if errors.Is(err, bufio.ErrBufferFull) || (quotes%2 == 1 && err == nil) {
			continue // the row goes on: a long line, or a line break inside quotes
		}
		if errors.Is(err, io.EOF) && len(row) == 0 {
			return nil
		}
		rec := Record{Index: n}
		if errors.Is(err, io.EOF) {
			rec.Err = errors.New("the file ends inside it (no line break after it): the file is truncated")
		} else {
			rec.Offset, rec.HasOffset, rec.Partition, rec.HasPartition, rec.Err = csvRow(row, len(fields), offsetCol, partCol)
		}
		n++
		if err := fn(rec); err != nil {
			return err
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		row, quotes = row[:0], 0
	}
}

// csvRow parses one row, with its line break, of want columns, and
// returns column offsetCol as an offset and partCol as a Kafka partition
// (-1: no such column).
func csvRow(row []byte, want, offsetCol, partCol int) (offset int64, hasOffset bool, partition int32, hasPartition bool, err error) {
	if want == 1 && len(row) == 1 {
		return 0, false, 0, false, nil // an empty line: one null field
	}
	cr := csv.NewReader(bytes.NewReader(row))
	cr.FieldsPerRecord = want
	cols, err := cr.Read()
	if err != nil {
		return 0, false, 0, false, err
	}
	if partCol >= 0 {
		p, err := strconv.ParseInt(cols[partCol], 10, 32)
		if err != nil {
			return 0, false, 0, false, fmt.Errorf("partition column %q is not an int32", cols[partCol])
		}
		partition, hasPartition = int32(p), true
	}
	if offsetCol < 0 {
		return 0, false, partition, hasPartition, nil
	}
	offset, err = strconv.ParseInt(cols[offsetCol], 10, 64)
	if err != nil {
		return 0, false, 0, false, fmt.Errorf("offset column %q is not an integer", cols[offsetCol])
	}
	return offset, true, partition, hasPartition, nil
}
