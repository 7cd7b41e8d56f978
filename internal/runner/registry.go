package runner

import (
	"context"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/source"
)

// resolving is the stage between the consumer and the sink when a schema
// registry types records: before a batch goes to the sink, every schema id
// in it is fetched, so that the sink's encoders, under the sink's lock,
// only read the registry's cache. While the registry can't be reached,
// WriteSome waits here, and with it the poll loop, so every partition
// waits: the registry is shared. No record is dropped; a graceful stop ends
// the wait, and the batch is then neither written nor committed.
type resolving struct {
	source.Writer
	reg  *registry.Registry
	stop context.Context // the graceful stop
}

func (r resolving) WriteSome(ctx context.Context, recs []*kgo.Record) (int, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.stop, cancel)()
	if err := r.reg.Resolve(rctx, recs); err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			// Stopping while the registry is away: take nothing. The
			// source then finds the stop and returns.
			return 0, nil
		}
		return 0, fmt.Errorf("schema registry: %w", err)
	}
	return r.Writer.WriteSome(ctx, recs)
}

// typedSchemas is format.Typed as the sink takes it.
type typedSchemas struct{ *format.Typed }

func (t typedSchemas) NewEncoder(w io.Writer, schemas string) (format.Encoder, error) {
	return t.Typed.NewEncoder(w, schemas)
}
