package sink

import (
	"io"
	"sync"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
)

// A finished file's encoder and compressor are kept for a later file,
// which resets them instead of building new ones: a zstd encoder's tables
// and history (some 2 MiB) or a gzip window cost far more to allocate and
// clear than a file's first records cost to encode, and a sink that
// rotates many small files would otherwise make that garbage at every
// open (docs/design.md, "Reusing encoders").
//
// An idle chain still holds its memory, so it keeps its file's
// FileEncoders charge while it waits: the charge moves to the file that
// takes it. At most idleChains wait, none while the budget is over its
// high watermark, and relief drops them all.
const idleChains = 4

// encoderReset is an encoder that can start a new file on w after Close
// (format's jsonl and avro encoders).
type encoderReset interface {
	Reset(w io.Writer) error
}

// compressorReset is a compressor that can start a new stream on w after
// Close (every format.NewCompressor).
type compressorReset interface {
	Reset(w io.Writer)
}

type chain struct {
	enc  format.Encoder
	comp io.WriteCloser
}

// chains are the idle chains of a sink.
type chains struct {
	mu   sync.Mutex
	idle []chain
}

// reuseChain returns a kept chain reset to write into w, or ok false.
// Typed files are built for their schemas and are not kept.
// A file goroutine (open); it takes chains.mu.
func (s *Sink) reuseChain(w io.Writer, schemas string) (enc format.Encoder, comp io.WriteCloser, ok bool) {
	if schemas != "" {
		return nil, nil, false
	}
	s.chains.mu.Lock()
	n := len(s.chains.idle)
	if n == 0 {
		s.chains.mu.Unlock()
		return nil, nil, false
	}
	c := s.chains.idle[n-1]
	s.chains.idle[n-1] = chain{}
	s.chains.idle = s.chains.idle[:n-1]
	s.chains.mu.Unlock()
	// The file that takes it was charged when it opened.
	s.budget.Release(budget.FileEncoders, s.cfg.CompressorMemory)
	c.comp.(compressorReset).Reset(w)
	if err := c.enc.(encoderReset).Reset(c.comp); err != nil {
		// The header went to w and failed: a new chain would fail alike.
		// This one is dropped.
		return nil, nil, false
	}
	return c.enc, c.comp, true
}

// keepChain keeps f's chain for a later file, if both its parts can be
// reset and there is room. f was finished without error.
// f's goroutine, after finish; it takes chains.mu.
func (s *Sink) keepChain(f *openFile) {
	if f.schemas != "" || s.budget.Over() {
		return
	}
	if _, ok := f.enc.(encoderReset); !ok {
		return
	}
	if _, ok := f.comp.(compressorReset); !ok {
		return
	}
	s.chains.mu.Lock()
	defer s.chains.mu.Unlock()
	if len(s.chains.idle) >= idleChains {
		return
	}
	s.budget.Acquire(budget.FileEncoders, s.cfg.CompressorMemory)
	s.chains.idle = append(s.chains.idle, chain{enc: f.enc, comp: f.comp})
}

// dropChains lets the idle chains go, and their charge.
// The poll side (relieveLocked, router.mu held), Flush or Close; it takes
// chains.mu.
func (s *Sink) dropChains() {
	s.chains.mu.Lock()
	n := len(s.chains.idle)
	clear(s.chains.idle)
	s.chains.idle = s.chains.idle[:0]
	s.chains.mu.Unlock()
	s.budget.Release(budget.FileEncoders, int64(n)*s.cfg.CompressorMemory)
}
