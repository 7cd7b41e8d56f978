// Package readback decodes the data files Spillway stored: it reads a
// file back record by record, in every format and compression Spillway
// writes, so that what storage holds can be checked (verify --deep) and a
// prefix written before the ledger can be resumed from. It only reads.
package readback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/avro"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/format/jsonfmt"
	"github.com/spillway/spillway/internal/format/parquet"
)

// Record is one record read back from a data file.
type Record struct {
	Index int64 // its position in the file, from 0
	// Offset is the record's top-level "offset" member, when HasOffset.
	Offset    int64
	HasOffset bool
	// Partition is the record's Kafka partition, its top-level
	// "partition" member (column), when HasPartition: format.fields lists
	// partition. A member of that name that is not an int32 is left alone
	// rather than refused: a bare value may have a field of that name.
	Partition    int32
	HasPartition bool
	// Err is why the record can't be read (not one JSON value, or an
	// "offset" that is not an integer). Reading goes on with the next one.
	Err error
}

// UnsupportedError is a file whose records can't be read back.
type UnsupportedError struct {
	Key string
	Why string
}

func (e *UnsupportedError) Error() string { return fmt.Sprintf("%s: %s", e.Key, e.Why) }

// ReadError is a file that can't be read past record Record: its stream
// is broken (a truncated or corrupt compression, a storage error).
type ReadError struct {
	Key    string
	Record int64
	Err    error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("%s: record %d: %v", e.Key, e.Record, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Reader is what reading a file back needs of storage; *storage.Bucket
// is one.
type Reader interface {
	// Read opens the object under key, as storage.Bucket.Read does: only
	// a committed object is visible, and it is whole (the contract on
	// storage's backend). The caller closes it.
	Read(ctx context.Context, key string) (io.ReadCloser, error)
}

// Records reads the records of the data file under key back, in file
// order, and calls fn for each. exts are the file's format and
// compression (naming.Names.ContentExts), whatever its name ends with. It
// reads jsonl and json files as Spillway writes them, one record per
// line, and avro and parquet files (records_typed.go); csv files need
// csvFields, format.fields, which say how their rows are laid out
// (records_csv.go) since nothing in a csv file tells; bytes files can't be
// read back (a value may hold the separator): they give an
// *UnsupportedError, as csv without csvFields does. A stream that breaks
// gives a *ReadError. A record that isn't one JSON value is passed to fn
// with Err set, and reading goes on.
//
// Records are checked without a nesting limit, so any value Spillway wrote
// reads back, however deep.
func Records(ctx context.Context, st Reader, key string, exts, csvFields []string, fn func(Record) error) error {
	rc, err := st.Read(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	r, ext, err := Decompress(rc, exts)
	if err != nil {
		return &ReadError{Key: key, Err: err}
	}
	defer r.Close()
	kind, known := formats.ByExt(ext)
	switch {
	case ext == "":
		return &UnsupportedError{Key: key, Why: "its name has no format extension, so its format is unknown"}
	case !known:
	case kind.JSONRecords:
		return readJSON(ctx, r, key, kind.Name == jsonfmt.JSON().Name, fn)
	case kind.Name == avro.Kind().Name:
		return readAvro(ctx, r, key, fn)
	case kind.Name == parquet.Kind().Name:
		return readParquet(ctx, r, key, fn)
	case kind.Name == format.CSV().Name:
		if len(csvFields) == 0 {
			return &UnsupportedError{Key: key, Why: "reading .csv files back needs format.fields, which says what their columns are"}
		}
		return readCSV(ctx, r, key, csvFields, fn)
	}
	return &UnsupportedError{Key: key, Why: fmt.Sprintf("reading .%s files back is not supported yet", ext)}
}

// readJSON reads the records of a jsonl or json file (JSONLines).
func readJSON(ctx context.Context, r io.Reader, key string, array bool, fn func(Record) error) error {
	return JSONLines(ctx, r, key, array, 256<<10, func(n int64, line []byte, complete bool) error {
		rec := Record{Index: n}
		s, err := scan(line)
		rec.Offset, rec.HasOffset, rec.Partition, rec.HasPartition, rec.Err = s.offset, s.hasOffset, s.partition, s.hasPartition, err
		if rec.Err == nil && !complete {
			rec.Err = errors.New("the file ends inside it (no line break after it): the file is truncated")
		}
		return fn(rec)
	})
}

// scanRecord checks that b is exactly one JSON value and returns its
// top-level "offset" member when b is an object that has an integer one.
// Unlike encoding/json it has no nesting limit: its only stack is one byte
// per open bracket.
func scanRecord(b []byte) (offset int64, hasOffset bool, err error) {
	s, err := scan(b)
	return s.offset, s.hasOffset, err
}

// scan is scanRecord, with the top-level "partition" member too: on error
// the scanner is the zero one.
func scan(b []byte) (recordScanner, error) {
	s := recordScanner{b: b}
	state := scanValue
	var err error
	for {
		s.i = skipSpace(b, s.i)
		switch state {
		case scanValue:
			state, err = s.value()
		case scanAfter:
			var done bool
			if state, done, err = s.after(); done {
				return s, nil
			}
		case scanKey:
			state, err = s.key()
		}
		if err != nil {
			return recordScanner{}, err
		}
	}
}

// scanState is what recordScanner expects at b[i].
type scanState int

const (
	scanValue scanState = iota // a value starts at i
	scanAfter                  // a value ended before i
	scanKey                    // an object member's key starts at i
)

// recordScanner is scanRecord's state: its position, the open brackets,
// and the top-level "offset" member once seen.
type recordScanner struct {
	b          []byte
	i          int
	stack      []byte
	wantOffset bool // the value at i is the top-level "offset" member
	offset     int64
	hasOffset  bool
	// wantPartition: the value at i is the first top-level "partition"
	// member.
	wantPartition bool
	partition     int32
	hasPartition  bool
}

// value reads the value that starts at b[i] (or opens its array or object)
// and returns the state that follows.
func (s *recordScanner) value() (scanState, error) {
	b := s.b
	if s.i >= len(b) {
		return 0, errors.New("unexpected end of JSON")
	}
	start := s.i
	var err error
	switch c := b[s.i]; {
	case c == '{' || c == '[':
		return s.open(c)
	case c == '"':
		if s.i, err = skipString(b, s.i); err != nil {
			return 0, err
		}
	case c == '-' || c >= '0' && c <= '9':
		if err := s.number(start); err != nil {
			return 0, err
		}
	case bytes.HasPrefix(b[s.i:], []byte("true")):
		s.i += 4
	case bytes.HasPrefix(b[s.i:], []byte("false")):
		s.i += 5
	case bytes.HasPrefix(b[s.i:], []byte("null")):
		s.i += 4
	default:
		return 0, fmt.Errorf("invalid character %q at byte %d", c, s.i)
	}
	if s.wantOffset && !s.hasOffset {
		return 0, fmt.Errorf("offset %s is not an integer", b[start:s.i])
	}
	s.wantOffset, s.wantPartition = false, false
	return scanAfter, nil
}

// open reads the bracket c at b[i], and an empty array or object whole.
func (s *recordScanner) open(c byte) (scanState, error) {
	if s.wantOffset {
		return 0, fmt.Errorf("offset is not an integer but an %s", map[byte]string{'{': "object", '[': "array"}[c])
	}
	s.wantPartition = false
	s.stack = append(s.stack, c)
	s.i = skipSpace(s.b, s.i+1)
	if s.i < len(s.b) && s.b[s.i] == c+2 { // '{'+2 is '}', '['+2 is ']'
		s.stack = s.stack[:len(s.stack)-1]
		s.i++
		return scanAfter, nil
	}
	if c == '{' {
		return scanKey, nil
	}
	return scanValue, nil
}

// number reads the number that starts at b[start], and keeps it as the
// offset when it is the top-level "offset" member.
func (s *recordScanner) number(start int) error {
	var integer bool
	var err error
	if s.i, integer, err = skipNumber(s.b, s.i); err != nil {
		return err
	}
	if s.wantPartition && integer {
		if p, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 32); err == nil {
			s.partition, s.hasPartition = int32(p), true
		}
	}
	if !s.wantOffset {
		return nil
	}
	if !integer {
		return fmt.Errorf("offset %s is not an integer", s.b[start:s.i])
	}
	if s.offset, err = strconv.ParseInt(string(s.b[start:s.i]), 10, 64); err != nil {
		return fmt.Errorf("offset %s: %w", s.b[start:s.i], err)
	}
	s.hasOffset = true
	return nil
}

// after reads what follows a value: a comma, a closing bracket, or, at the
// top level, the end of b (done).
func (s *recordScanner) after() (next scanState, done bool, err error) {
	b := s.b
	if len(s.stack) == 0 {
		if s.i != len(b) {
			return 0, false, fmt.Errorf("data after the value at byte %d", s.i)
		}
		return 0, true, nil
	}
	if s.i >= len(b) {
		return 0, false, errors.New("unexpected end of JSON")
	}
	top := s.stack[len(s.stack)-1]
	switch c := b[s.i]; {
	case c == ',':
		s.i++
		if top == '{' {
			return scanKey, false, nil
		}
		return scanValue, false, nil
	case c == top+2:
		s.stack = s.stack[:len(s.stack)-1]
		s.i++
		return scanAfter, false, nil
	default:
		return 0, false, fmt.Errorf("invalid character %q at byte %d", c, s.i)
	}
}

// key reads an object member's key and its colon.
func (s *recordScanner) key() (scanState, error) {
	b := s.b
	if s.i >= len(b) || b[s.i] != '"' {
		return 0, fmt.Errorf("an object key must be a string, at byte %d", s.i)
	}
	start := s.i
	var err error
	if s.i, err = skipString(b, s.i); err != nil {
		return 0, err
	}
	s.wantOffset = len(s.stack) == 1 && string(b[start:s.i]) == `"offset"`
	s.wantPartition = len(s.stack) == 1 && !s.hasPartition && string(b[start:s.i]) == `"partition"`
	if s.wantOffset && s.hasOffset {
		return 0, errors.New(`"offset" appears twice`)
	}
	s.i = skipSpace(b, s.i)
	if s.i >= len(b) || b[s.i] != ':' {
		return 0, fmt.Errorf("missing ':' after an object key, at byte %d", s.i)
	}
	s.i++
	return scanValue, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, fmt.Errorf("control character %#x in a string, at byte %d", c, i)
		case c == '\\':
			i++
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return 0, fmt.Errorf(`bad \u escape at byte %d`, i-1)
				}
				i += 4
			default:
				return 0, fmt.Errorf("bad escape %q at byte %d", b[i], i-1)
			}
		}
	}
	return 0, errors.New("unexpected end of JSON in a string")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// skipNumber returns the index after the number that starts at b[i], and
// whether it is an integer (no fraction, no exponent).
func skipNumber(b []byte, i int) (int, bool, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return 0, false, fmt.Errorf("invalid number at byte %d", start)
	}
	integer := true
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false, fmt.Errorf("invalid number at byte %d", start)
		}
		integer = false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false, fmt.Errorf("invalid number at byte %d", start)
		}
		integer = false
	}
	return i, integer, nil
}
