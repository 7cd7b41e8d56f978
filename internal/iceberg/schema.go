package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/spillway/spillway/internal/iceberg/tableschema"
)

// create makes the namespace and the table from the schema of the first
// of files that has partition_by's columns, with the partition spec of
// partition_by, at Catalog.Location. A file of an older value schema may
// lack an optional value field the table is partitioned by; its records
// are in that field's null partition, and a later file's schema has it.
// Another instance may create it first: then the error wraps
// catalog.ErrTableAlreadyExists and Commit reloads.
func (t *Table) create(ctx context.Context, files ...File) (*table.Table, error) {
	loc := t.c.Location(t.name)
	lfs, err := iceio.LoadFS(ctx, t.c.props, loc)
	if err != nil {
		return nil, fmt.Errorf("iceberg: create %s: FileIO for %s: %w", t.name, loc, t.c.scrub(err))
	}
	fs := literalIO{lfs, loc}
	var sc *iceberg.Schema
	var spec iceberg.PartitionSpec
	for i, f := range files {
		fsc, _, err := tableschema.FileSchema(fs, f.Location)
		if err != nil {
			return nil, fmt.Errorf("iceberg: create %s: %w", t.name, refused(err))
		}
		if fsc, err = tableschema.Of(t.c.opts.PartitionBy, fsc); err != nil {
			return nil, fmt.Errorf("iceberg: create %s: %w (%w)", t.name, err, ErrRefused)
		}
		if spec, err = tableschema.PartitionSpec(t.c.opts.PartitionBy, fsc); err != nil {
			if i < len(files)-1 {
				continue // another file may have the column
			}
			return nil, fmt.Errorf("iceberg: create %s: %w (%w)", t.name, err, ErrRefused)
		}
		sc = fsc
		break
	}
	ns := catalog.NamespaceFromIdent(t.ident)
	if err := t.c.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("iceberg: create namespace %s: %w", strings.Join(ns, "."), t.c.scrub(err))
	}
	tbl, err := t.c.cat.CreateTable(ctx, t.ident, sc, catalog.WithPartitionSpec(&spec), catalog.WithLocation(loc), catalog.WithProperties(tableProps))
	if err != nil {
		return nil, fmt.Errorf("iceberg: create table %s: %w", t.name, t.c.scrub(err))
	}
	t.mu.Lock()
	t.tbl = tbl
	t.mu.Unlock()
	return tbl, nil
}

// tableProps are the properties of a table Spillway creates. Merging
// manifests (Java's default, not iceberg-go's) keeps a table that gets a
// small commit every commit_interval from piling up one manifest per
// commit, which every reader's planning would open. Deleting metadata
// files after commit keeps the last 100 (write.metadata.previous-versions-max)
// instead of every one: each is a copy of the table's metadata, which
// lists every snapshot, so keeping all grows storage with the square of
// the commits (40 MB after 300 commits, TestThousandCommits).
var tableProps = iceberg.Properties{
	table.ManifestMergeEnabledKey:             "true",
	table.MetadataDeleteAfterCommitEnabledKey: "true",
}

// adopt makes a table that holds no snapshot yet take first's field ids,
// as the files carry them (stable ids, see docs/iceberg.md), and the
// partition spec bound to them: CreateTable numbers a new table's fields
// afresh (1..n), but a schema added to a table keeps its ids. It commits
// the schema and the spec before the first snapshot, asserting the schema
// it saw, so that two instances adopting at once conflict and reload. It
// returns the table as it is then.
func (t *Table) adopt(ctx context.Context, tbl *table.Table, files ...File) (*table.Table, error) {
	tfs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	fs := literalIO{tfs, tbl.Location()}
	first := files[0]
	for _, f := range files {
		// As create: the first file whose schema has partition_by's
		// columns (an older value schema may lack one).
		fsc, _, err := tableschema.FileSchema(fs, f.Location)
		if err != nil {
			break
		}
		if fsc, err = tableschema.Of(t.c.opts.PartitionBy, fsc); err == nil {
			if _, err = tableschema.PartitionSpec(t.c.opts.PartitionBy, fsc); err == nil {
				first = f
				break
			}
		}
	}
	sc, _, err := tableschema.FileSchema(fs, first.Location)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w", t.name, refused(err))
	}
	if sc, err = tableschema.Of(t.c.opts.PartitionBy, sc); err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w (%w)", t.name, err, ErrRefused)
	}
	cur := tbl.Schema()
	if tableschema.SameFields(cur, sc) {
		return tbl, nil
	}
	spec, err := tableschema.PartitionSpec(t.c.opts.PartitionBy, sc)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w (%w)", t.name, err, ErrRefused)
	}
	meta := tbl.Metadata()
	reqs := []table.Requirement{table.AssertTableUUID(meta.TableUUID()), table.AssertCurrentSchemaID(cur.ID)}
	updates := []table.Update{
		table.NewAddSchemaUpdate(sc), table.NewSetCurrentSchemaUpdate(-1),
		table.NewAddPartitionSpecUpdate(&spec, false), table.NewSetDefaultSpecUpdate(-1),
	}
	if _, _, err := t.c.cat.CommitTable(ctx, t.ident, reqs, updates); err != nil {
		return nil, fmt.Errorf("iceberg: %s: give the table the files' field ids: %w (%w)", t.name, t.c.scrub(err), errConflict)
	}
	return t.refresh(ctx)
}

// evolve checks each file's schema against the table's and, with
// evolve_schema, stages the optional fields the files add in tx: columns,
// and fields inside a struct column at any depth (a struct, a list's
// element struct, a map's value struct), such as a field a registry
// schema adds to the envelope's value. A field whose type changes, a
// required field a file lacks or makes optional, a new required field and
// a new field whose id the table gives another field stop the commit with
// an error naming the field's path (value.user.email).
func (t *Table) evolve(ctx context.Context, tbl *table.Table, files []File) (*table.Table, error) {
	tfs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	fs := literalIO{tfs, tbl.Location()}
	ts := tbl.Schema()
	m := tableschema.NewMerger(t.name, tbl.Metadata().Schemas(), ts)
	fields := ts.Fields()
	for _, f := range files {
		fsch, rows, err := tableschema.FileSchema(fs, f.Location)
		if err != nil {
			return nil, fmt.Errorf("iceberg: %s: %w", t.name, err)
		}
		// The ledger's count is the file's: a mismatch is a file replaced
		// or a ledger entry that names the wrong one.
		if f.Records > 0 && rows != f.Records {
			return nil, fmt.Errorf("iceberg: %s: file %s holds %d records, but its ledger entry says %d", t.name, f.Location, rows, f.Records)
		}
		if fields, err = m.Merge(f.Location, fields, fsch.Fields()); err != nil {
			return nil, err
		}
	}
	added := m.Added()
	if len(added) == 0 && !m.AddsPartitionColumn() {
		return tbl, nil
	}
	names := strings.Join(added, ", ")
	if len(added) > 0 && !t.c.opts.EvolveSchema {
		return nil, fmt.Errorf("iceberg: %s: file %s adds the fields %s and iceberg.evolve_schema is false; set it to true, or add the columns to the table", t.name, m.AddedBy(), names)
	}
	// The table keeps the files' ids: the union of its fields and the new
	// ones, as they are numbered in the files, becomes its schema, in the
	// same catalog commit as the snapshot that adds the files (withSchema).
	next := iceberg.NewSchemaWithIdentifiers(ts.ID+1, ts.IdentifierFieldIDs, fields...)
	staged, err := t.withSchema(tbl, next)
	if err != nil {
		if m.AddsPartitionColumn() {
			names = strings.Join(append(added, tableschema.PartitionColumn), ", ")
		}
		return nil, fmt.Errorf("iceberg: %s: add the fields %s: %w", t.name, names, err)
	}
	return staged, nil
}

// refused marks a file's schema error as a refusal (ErrRefused, which
// stops the commit loop for good), unless reading the file failed: that
// is storage's, and the commit is retried.
func refused(err error) error {
	var re *tableschema.ReadError
	if errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ErrRefused)
}
