// Package reuse keeps a finished file's encoder and compressor for a later
// file, which resets them instead of building new ones: a zstd encoder's
// tables and history (some 2 MiB) or a gzip window cost far more to
// allocate and clear than a file's first records cost to encode, and a
// sink that rotates many small files would otherwise make that garbage at
// every open (docs/design.md, "Reusing encoders").
//
// An idle chain still holds its memory, so it keeps its file's
// FileEncoders charge while it waits: the charge moves to the file that
// takes it. At most Idle wait, none while the budget is over its high
// watermark, and relief drops them all.
package reuse

import (
	"io"
	"sync"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/format"
)

// Idle is the most chains kept waiting for a file.
const Idle = 4

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

// Chains are a sink's idle chains. Any goroutine may call its methods: they
// take its own lock, never a caller's.
type Chains struct {
	b   *budget.Budget
	mem int64 // what one chain holds: the FileEncoders charge it carries

	mu   sync.Mutex
	idle []chain
}

// New returns an empty pool whose chains hold mem each, charged to b.
func New(b *budget.Budget, mem int64) *Chains { return &Chains{b: b, mem: mem} }

// Take returns a kept chain reset to write into w, or ok false. The file
// that takes it was charged when it opened, so the chain's charge is
// released.
// A file goroutine, as it opens its chain.
func (c *Chains) Take(w io.Writer) (enc format.Encoder, comp io.WriteCloser, ok bool) {
	c.mu.Lock()
	n := len(c.idle)
	if n == 0 {
		c.mu.Unlock()
		return nil, nil, false
	}
	ch := c.idle[n-1]
	c.idle[n-1] = chain{}
	c.idle = c.idle[:n-1]
	c.mu.Unlock()
	c.b.Release(budget.FileEncoders, c.mem)
	ch.comp.(compressorReset).Reset(w)
	if err := ch.enc.(encoderReset).Reset(ch.comp); err != nil {
		// The header went to w and failed: a new chain would fail alike.
		// This one is dropped.
		return nil, nil, false
	}
	return ch.enc, ch.comp, true
}

// Keep keeps a finished file's chain for a later file, if both its parts
// can be reset and there is room; it charges the chain again while it
// waits. The file was finished without error, and its encoder is not
// typed by schemas (a typed file's chain fits only its schemas).
// The file's goroutine, after it finished the file.
func (c *Chains) Keep(enc format.Encoder, comp io.WriteCloser) {
	if c.b.Over() {
		return
	}
	if _, ok := enc.(encoderReset); !ok {
		return
	}
	if _, ok := comp.(compressorReset); !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) >= Idle {
		return
	}
	c.b.Acquire(budget.FileEncoders, c.mem)
	c.idle = append(c.idle, chain{enc: enc, comp: comp})
}

// Drop lets the idle chains go, and their charge.
// The poll side (relief, with the router's lock held), Flush or Close.
func (c *Chains) Drop() {
	c.mu.Lock()
	n := len(c.idle)
	clear(c.idle)
	c.idle = c.idle[:0]
	c.mu.Unlock()
	c.b.Release(budget.FileEncoders, int64(n)*c.mem)
}
