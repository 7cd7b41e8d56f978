// Package gate passes a file's compressed bytes to its storage writer,
// holding a record larger than the budget's room back while storage is
// behind (docs/design.md, "The write pipeline").
//
// Storage takes bytes in the background, and the budget, not a blocked
// write, slows consumption. A record larger than the budget's room escapes
// that: it is written in one Encode call, and queued whole it would cost
// its size a second time (see budget.Plan). So while the budget is over its
// limit, which such a record is what takes it there, the gate lets a piece
// through only once storage has taken what the file queued before it. Once
// the call's context has ended (the stop's deadline passed) it waits no
// more: the rest of the record is queued, and the file stays whole for the
// stop to finish or abandon.
package gate

import (
	"context"
	"io"
)

// Writer is the storage writer behind a gate.
type Writer interface {
	io.Writer
	// WaitQueued blocks until at most max written bytes wait for
	// storage, the upload failed, or ctx ends.
	WaitQueued(ctx context.Context, max int64) error
}

// Budget says whether the memory budget is over its limit.
type Budget interface {
	OverLimit() bool
}

// Piece is the most a gate hands the writer at once, and Queued what a
// file may keep queued while the budget is over its limit: enough to keep
// storage busy, small against any budget.
const (
	Piece  = 256 << 10
	Queued = 1 << 20
)

// Gate sits between a file's compressor and its storage writer. Only the
// file's goroutine uses it.
type Gate struct {
	w Writer
	b Budget
	// ctx is the context of the Write whose batch the file's goroutine
	// encodes, or the sink's while it finishes the file; nil when the
	// file is thrown away: then nothing waits.
	ctx context.Context
}

// New returns a gate in front of w, which waits while b is over its limit.
func New(w Writer, b Budget) *Gate { return &Gate{w: w, b: b} }

// Bind sets the context that bounds the gate's waits: the Write's whose
// batch is encoded, or the sink's while the file is finished.
// The file's goroutine, between writes.
func (g *Gate) Bind(ctx context.Context) { g.ctx = ctx }

// Unbind makes the gate wait no more, until the next Bind: between
// batches, and when the file is thrown away.
// The file's goroutine, between writes.
func (g *Gate) Unbind() { g.ctx = nil }

// Write passes p on in pieces, waiting for storage while the budget is
// over its limit. The file's goroutine only.
func (g *Gate) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if g.ctx != nil && g.ctx.Err() == nil && g.b.OverLimit() {
			// An error is the context's, or storage's, which the
			// next write reports.
			_ = g.w.WaitQueued(g.ctx, Queued)
		}
		k, err := g.w.Write(p[:min(len(p), Piece)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}
