package spool

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// File is one open file's records on disk. Append and the Reader are used
// by one goroutine at a time.
//
// Framing, per record: a uvarint length of the rest, then the topic
// (uvarint length, bytes), the partition, offset and timestamp (Unix
// milliseconds, as Kafka has it) as varints, the key and the value as a uvarint of their
// length plus one (0 for nil, so that nil and empty stay apart) and their
// bytes, and the headers: their count, then per header its key (length,
// bytes) and its value (as the key and value).
type File struct {
	f    *os.File
	size int64 // bytes appended whole
	// started is where write-back was last started, synced where the
	// page cache was last dropped: see dropCache.
	synced, started int64
}

// cacheWindow: after every this many bytes written, the file's pages are
// written back and dropped from the page cache, so that the spool does not
// fill a memory cgroup with page cache (dirty pages are charged to it, and
// under cgroup v1 they are not always reclaimed in time).
const cacheWindow = 4 << 20

// Size is the bytes appended so far.
func (f *File) Size() int64 { return f.size }

// Append writes recs at the end of the file with one write, and returns
// how many bytes it added. On an error (the disk full, the directory gone)
// it cuts the file back to what it held before, so that it holds whole
// batches only, and reports the error; the file may still be read back
// up to Size.
func (f *File) Append(recs []*kgo.Record) (int64, error) {
	// Large keys and values are written from where they are, not copied:
	// a record larger than the budget's room must cost its size once.
	a := appendPool.Get().(*appender)
	defer a.put()
	for _, r := range recs {
		a.appendRecord(r)
	}
	a.cut(len(a.buf), nil)
	n, err := a.write(int(f.f.Fd()), f.size)
	if err != nil {
		if terr := f.f.Truncate(f.size); terr != nil {
			err = errors.Join(err, fmt.Errorf("cut back to %d bytes: %w", f.size, terr))
		}
		return 0, fmt.Errorf("append to spool file: %w", err)
	}
	f.size += n
	f.dropCache()
	return n, nil
}

// appender is an append's bytes: buf holds all but large keys and
// values, and segs lists the pieces in order (buf's up to bufDone, and the
// large fields), written with one pwritev through iov. Appenders are
// shared by all files, so that an open file holds none: at most one per
// append under way, a copy of its batch, whose bytes the batch's count
// covers once (see budget.Plan on the spool).
type appender struct {
	buf     []byte
	bufDone int
	segs    []seg
	iov     [][]byte
}

var appendPool = sync.Pool{New: func() any { return new(appender) }}

func (a *appender) put() {
	if cap(a.buf) > 1<<20 {
		a.buf = nil // don't keep a large batch's buffer
	}
	clear(a.iov) // let the records go
	clear(a.segs)
	a.buf, a.segs, a.iov, a.bufDone = a.buf[:0], a.segs[:0], a.iov[:0], 0
	appendPool.Put(a)
}

// cut ends the segment of buf that ends at end, and adds big after it.
func (a *appender) cut(end int, big []byte) {
	if end > a.bufDone {
		a.segs = append(a.segs, seg{from: a.bufDone, to: end})
	}
	if big != nil {
		a.segs = append(a.segs, seg{big: big})
	}
	a.bufDone = end
}

// seg is a piece of a write: buf[from:to], or big.
type seg struct {
	from, to int
	big      []byte
}

// write writes the segments to fd at off.
func (a *appender) write(fd int, off int64) (int64, error) {
	var total int64
	for _, s := range a.segs {
		b := s.big
		if b == nil {
			b = a.buf[s.from:s.to]
		}
		a.iov = append(a.iov, b)
		total += int64(len(b))
	}
	iov := a.iov
	for len(iov) > 0 {
		n, err := unix.Pwritev(fd, iov[:min(len(iov), 1024)], off)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 {
			if n >= len(iov[0]) {
				n -= len(iov[0])
				iov = iov[1:]
			} else {
				iov[0] = iov[0][n:]
				n = 0
			}
		}
		for len(iov) > 0 && len(iov[0]) == 0 {
			iov = iov[1:]
		}
	}
	return total, nil
}

// dropCache starts writing back each full window of pages as it fills,
// and drops the window before it from the page cache once its write-back
// is done (it had a window's time to run). The errors are ignored: these
// are hints, and a file system that doesn't take them (tmpfs) holds the
// bytes in memory anyway.
func (f *File) dropCache() {
	fd := int(f.f.Fd())
	for f.size-f.started >= cacheWindow {
		if f.started > f.synced {
			_ = unix.SyncFileRange(fd, f.synced, f.started-f.synced,
				unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			_ = unix.Fadvise(fd, f.synced, f.started-f.synced, unix.FADV_DONTNEED)
			f.synced = f.started
		}
		end := f.size &^ (cacheWindow - 1)
		_ = unix.SyncFileRange(fd, f.started, end-f.started, unix.SYNC_FILE_RANGE_WRITE)
		f.started = end
	}
}

// Remove deletes the file.
func (f *File) Remove() error {
	err := f.f.Close()
	if rerr := os.Remove(f.f.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}

// bigField: a key or value this large is written from where it is.
const bigField = 64 << 10

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(v))+1)
	return append(b, v...)
}

// appendField appends v as appendBytes does, or its length alone with v
// as a segment of its own when it is large.
func (a *appender) appendField(v []byte) {
	if len(v) < bigField {
		a.buf = appendBytes(a.buf, v)
		return
	}
	a.buf = binary.AppendUvarint(a.buf, uint64(len(v))+1)
	a.cut(len(a.buf), v)
}

func (a *appender) appendRecord(r *kgo.Record) {
	ts := r.Timestamp.UnixMilli()
	n := uvarintLen(uint64(len(r.Topic))) + len(r.Topic) +
		varintLen(int64(r.Partition)) + varintLen(r.Offset) + varintLen(ts) +
		bytesLen(r.Key) + bytesLen(r.Value) + uvarintLen(uint64(len(r.Headers)))
	for _, h := range r.Headers {
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	b := binary.AppendUvarint(a.buf, uint64(n))
	b = binary.AppendUvarint(b, uint64(len(r.Topic)))
	b = append(b, r.Topic...)
	b = binary.AppendVarint(b, int64(r.Partition))
	b = binary.AppendVarint(b, r.Offset)
	b = binary.AppendVarint(b, ts)
	a.buf = b
	a.appendField(r.Key)
	a.appendField(r.Value)
	a.buf = binary.AppendUvarint(a.buf, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		a.buf = binary.AppendUvarint(a.buf, uint64(len(h.Key)))
		a.buf = append(a.buf, h.Key...)
		a.appendField(h.Value)
	}
}

func bytesLen(v []byte) int {
	if v == nil {
		return 1
	}
	return uvarintLen(uint64(len(v))+1) + len(v)
}

func varintLen(v int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], v)
}

// Reader reads a spool file's records back, in the order appended.
type Reader struct {
	f    *File
	r    *bufio.Reader
	off  int64 // read so far
	drop int64 // page cache dropped up to here
	buf  []byte
	rec  kgo.Record
	hdrs []kgo.RecordHeader
}

// Reader reads the file from its start. Appending must have ended.
func (f *File) Reader() *Reader {
	return &Reader{f: f, r: bufio.NewReaderSize(io.NewSectionReader(f.f, 0, f.size), 64<<10)}
}

// ErrCorrupt: a spool file does not hold what was appended to it.
var ErrCorrupt = errors.New("spool file is corrupt")

// Next returns the next record, or io.EOF after the last. The record and
// its bytes are reused by the next call: the caller must be done with
// them by then.
func (r *Reader) Next() (*kgo.Record, error) {
	n, err := binary.ReadUvarint(r.r)
	if err == io.EOF && r.off == r.f.size {
		r.dropCache(true)
		return nil, io.EOF
	}
	if err == io.EOF {
		// Shorter than what was appended: cut by someone else.
		return nil, fmt.Errorf("%w: it ends at %d of %d bytes appended", ErrCorrupt, r.off, r.f.size)
	}
	if err != nil {
		return nil, r.readErr(err)
	}
	if n > uint64(r.f.size-r.off) {
		return nil, fmt.Errorf("%w: a record of %d bytes at %d", ErrCorrupt, n, r.off)
	}
	if uint64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	body := r.buf[:n]
	if _, err := io.ReadFull(r.r, body); err != nil {
		return nil, r.readErr(err)
	}
	r.off += int64(uvarintLen(n)) + int64(n)
	if err := r.decode(body); err != nil {
		return nil, err
	}
	if cap(r.buf) > 4<<20 {
		r.buf = nil // don't keep a large record's buffer past the next
	}
	r.dropCache(false)
	return &r.rec, nil
}

// readErr: a file that ends before what was appended to it was cut by
// someone else.
func (r *Reader) readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: it ends before the %d bytes appended to it", ErrCorrupt, r.f.size)
	}
	return fmt.Errorf("read spool file: %w", err)
}

func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

func (r *Reader) dropCache(all bool) {
	if all || r.off-r.drop >= cacheWindow {
		_ = unix.Fadvise(int(r.f.f.Fd()), r.drop, r.off-r.drop, unix.FADV_DONTNEED)
		r.drop = r.off
	}
}

// decoder walks a record's body.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = ErrCorrupt
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	return d.take(n - 1)
}

func (r *Reader) decode(body []byte) error {
	d := decoder{b: body}
	topic := d.take(d.uvarint())
	if string(topic) != r.rec.Topic {
		r.rec.Topic = string(topic)
	}
	r.rec.Partition = int32(d.varint())
	r.rec.Offset = d.varint()
	ts := d.varint()
	r.rec.Key = d.bytes()
	r.rec.Value = d.bytes()
	nh := d.uvarint()
	if d.err == nil && nh > uint64(len(d.b)) {
		d.err = ErrCorrupt
	}
	r.hdrs = r.hdrs[:0]
	for i := uint64(0); i < nh && d.err == nil; i++ {
		k := d.take(d.uvarint())
		v := d.bytes()
		r.hdrs = append(r.hdrs, kgo.RecordHeader{Key: string(k), Value: v})
	}
	if d.err != nil {
		return fmt.Errorf("%w at %d", d.err, r.off)
	}
	r.rec.Timestamp = time.UnixMilli(ts)
	r.rec.Headers = nil
	if nh > 0 {
		r.rec.Headers = r.hdrs
	}
	return nil
}
