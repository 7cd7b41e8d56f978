package runner

import (
	"context"
	"fmt"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/tables"
)

// openTables opens the Iceberg catalog when iceberg.table is set, before
// anything is consumed: a catalog that can't be reached stops the start.
func (p *pipeline) openTables(ctx context.Context) error {
	if !p.cfg.Iceberg.Enabled() {
		return nil
	}
	cat, err := tables.OpenCatalog(ctx, p.cfg)
	if err != nil {
		return fmt.Errorf("iceberg: %w", err)
	}
	p.cat = cat
	if c, ok := cat.(interface{ Close() error }); ok {
		p.onClose(func() {
			if err := c.Close(); err != nil {
				p.log.Warn("iceberg: closing the catalog", "err", err)
			}
		})
	}
	return nil
}

// newCommitter is the table commit loop over the ledger, or nil without a
// table.
func (p *pipeline) newCommitter() *tables.Committer {
	if p.cat == nil || p.led == nil {
		return nil
	}
	return tables.New(p.cat, p.led, tables.OptionsFor(p.cfg), p.log)
}

// tablesWriter is the writer with the commit loop told of each assignment
// (whose catch-up it runs) and drop, and whose permanent error stops the
// run as the writer's own would.
type tablesWriter struct {
	writer
	tab *tables.Committer
}

func (w tablesWriter) Assign(tp offsets.TopicPartition, id ledger.Identity, pt ledger.Point) {
	w.writer.Assign(tp, id, pt)
	w.tab.Assigned(tp, id)
}

func (w tablesWriter) Drop(tps map[offsets.TopicPartition]bool) {
	w.writer.Drop(tps)
	w.tab.Dropped(tps)
}

func (w tablesWriter) Err() error {
	if err := w.writer.Err(); err != nil {
		return err
	}
	return w.tab.Err()
}

// runTables runs the commit loop until ctx ends; the returned func waits
// for it. Without a table it does nothing.
func (p *pipeline) runTables(ctx context.Context) (wait func()) {
	if p.tab == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.tab.Run(ctx); err != nil {
			p.log.Error("iceberg: the table commit loop stopped; the run stops (the files stay in the ledger, and the next start commits them)", "err", err)
		}
	}()
	return func() { <-done }
}

// closeTables commits, after a graceful stop stored everything, the files
// still waiting: the last snapshot.
func (p *pipeline) closeTables(ctx context.Context) error {
	if p.tab == nil {
		return nil
	}
	if err := p.tab.Close(ctx); err != nil {
		return fmt.Errorf("graceful stop: files are stored and their offsets committed, but the last table commit failed (the next start commits them from the ledger): %w", err)
	}
	return nil
}
