package audit

import (
	"context"
	"hash"
	"hash/crc32"
	"io"

	"github.com/spillway/spillway/internal/readback"
)

// summingReader reads objects for a deep scan and sums the bytes of the
// one it opened, as the records are read: the file is read once for both.
type summingReader struct {
	st readback.Reader
	rc *summed
}

func (r *summingReader) Read(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := r.st.Read(ctx, key)
	if err != nil {
		return nil, err
	}
	r.rc = &summed{rc: rc, h: crc32.New(crc32.MakeTable(crc32.Castagnoli))}
	r.rc.tee = io.TeeReader(rc, r.rc.h)
	return r.rc, nil
}

// sum is the CRC-32C of the whole object, once the reader that Read
// returned is closed; ok is false when it was never opened or could not
// be read to its end (the records' reader then says why, or err does).
func (r *summingReader) sum() (sum uint32, ok bool, err error) {
	if r.rc == nil || !r.rc.closed {
		return 0, false, nil
	}
	return r.rc.h.Sum32(), r.rc.err == nil, r.rc.err
}

// summed is an object being read and summed. Close reads what the
// records' reader left (a format that stops at its own end, a reader that
// gave up at a broken record, a file that can't be read back at all) into
// the sum first, so that it is of every byte stored.
type summed struct {
	rc     io.ReadCloser
	tee    io.Reader
	h      hash.Hash32
	err    error
	closed bool
}

func (s *summed) Read(p []byte) (int, error) {
	n, err := s.tee.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

func (s *summed) Close() error {
	if !s.closed {
		s.closed = true
		if _, err := io.Copy(io.Discard, s.tee); err != nil && s.err == nil {
			s.err = err
		}
	}
	return s.rc.Close()
}
