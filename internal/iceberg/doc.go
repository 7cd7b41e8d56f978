// Package iceberg commits the data files Spillway has stored to Apache
// Iceberg tables, exactly once: it opens a catalog (the embedded SQL
// catalog on a SQLite file, or a REST catalog), creates a table from the
// first file's schema, and adds files, never rewriting them, in snapshots
// whose summary records the Kafka offsets they make visible. That record
// is how a restart, another instance or a zombie knows which files are
// already in the table: see Table.Commit and docs/iceberg.md.
//
// This package is the commit; its subpackages hold the parts that need
// no commit loop: catalog opens the catalog, datafile builds the
// manifest entries of the files, tableschema reads a file's schema and
// derives the table's schema, partition spec and schema evolution from
// it, and maintain expires snapshots and finds orphaned files.
package iceberg
