package sink

import (
	"context"

	"github.com/spillway/spillway/internal/budget"
)

// gate passes a file's compressed bytes to its storage writer. Storage
// takes them in the background, and the budget, not a blocked write, slows
// consumption. A record larger than the budget's room escapes that: it is
// written in one Encode call, and queued whole it would cost its size a
// second time (see budget.Plan). So while the budget is over its limit,
// which such a record is what takes it there, the gate lets a piece through
// only once storage has taken what the file queued before it. Once the
// call's context has ended (the stop's deadline passed) it waits no more:
// the rest of the record is queued, and the file stays whole for the stop
// to finish or abandon.
type gate struct {
	w Writer
	b *budget.Budget
	// ctx is the context of the Write whose batch the file's goroutine
	// encodes, or the sink's while it finishes the file; nil when the
	// file is thrown away: then nothing waits. Only the file's goroutine
	// uses the gate.
	ctx context.Context
}

// gatePiece is the most a gate hands the writer at once, and gateQueued
// what a file may keep queued while the budget is over its limit: enough
// to keep storage busy, small against any budget.
const (
	gatePiece  = 256 << 10
	gateQueued = 1 << 20
)

// Write passes p on in pieces, waiting for storage while the budget is
// over its limit. The file's goroutine only.
func (g *gate) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if g.ctx != nil && g.ctx.Err() == nil && g.b.OverLimit() {
			// An error is the context's, or storage's, which the
			// next write reports.
			_ = g.w.WaitQueued(g.ctx, gateQueued)
		}
		k, err := g.w.Write(p[:min(len(p), gatePiece)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}
