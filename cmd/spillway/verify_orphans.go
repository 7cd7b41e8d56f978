package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/tables"
	"github.com/spillway/spillway/internal/verify"
)

// defaultOrphanAge is how old an orphan must be before --remove-orphans
// removes it: Iceberg's remove_orphan_files's default (older_than, 3
// days). A file younger than that may be one a writer is uploading, or
// has uploaded and not yet named in the ledger.
const defaultOrphanAge = 72 * time.Hour

// orphanRemoval is what --remove-orphans does after verify's report.
type orphanRemoval struct {
	olderThan time.Duration
	dryRun    bool
	now       func() time.Time
}

// removeOrphans removes the orphans rep lists (data files under a table's
// data folder that no ledger entry names and no snapshot references)
// that are older than o.olderThan, printing each with its size. It
// removes nothing when verify found a problem: a storage or table that
// is not consistent is no ground to decide which files nothing needs.
func removeOrphans(ctx context.Context, w io.Writer, cfg *config.Config, rep verify.Report, o orphanRemoval) error {
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	if !rep.OK {
		fmt.Fprintln(w, "orphans: none removed, since verify found problems; fix them first")
		return nil
	}
	n := 0
	for _, tr := range rep.Tables {
		n += len(tr.Orphans)
	}
	if n == 0 {
		fmt.Fprintln(w, "orphans: none")
		return nil
	}
	cat, err := iceberg.Open(ctx, cfg.Iceberg, cfg.IcebergWarehouse())
	if err != nil {
		return fmt.Errorf("iceberg: %w", err)
	}
	defer cat.Close()
	base := tables.OptionsFor(cfg).Base
	cutoff := o.now().Add(-o.olderThan)
	var removed, kept int
	var removedBytes int64
	var errs []error
	for _, tr := range rep.Tables {
		if len(tr.Orphans) == 0 {
			continue
		}
		tb, err := cat.Table(ctx, tr.Table)
		if err != nil {
			return fmt.Errorf("iceberg: table %s: %w", tr.Table, err)
		}
		// One load of the table for all its orphans.
		files, err := tb.Files(ctx)
		if err != nil {
			return fmt.Errorf("iceberg: table %s: %w", tr.Table, err)
		}
		for _, orph := range tr.Orphans {
			loc := orph.Key
			if !strings.Contains(loc, "://") {
				loc = base + orph.Key
			}
			fi, err := files.Stat(loc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if fi.Modified.After(cutoff) {
				kept++
				fmt.Fprintf(w, "orphan kept: %s (%d bytes), modified %s, younger than --older-than %s\n", orph.Key, fi.Bytes, fi.Modified.UTC().Format(time.RFC3339), o.olderThan)
				continue
			}
			if !o.dryRun {
				if err := files.Remove(loc); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			removed++
			removedBytes += fi.Bytes
			fmt.Fprintf(w, "orphan %s: %s (%d bytes), modified %s\n", verb, orph.Key, fi.Bytes, fi.Modified.UTC().Format(time.RFC3339))
		}
	}
	fmt.Fprintf(w, "orphans: %s %d files, %d bytes; kept %d younger than %s\n", verb, removed, removedBytes, kept, o.olderThan)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove orphans: %w", err)
	}
	return nil
}
