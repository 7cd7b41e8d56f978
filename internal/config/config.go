// Package config loads Spillway's configuration from YAML and the
// environment, validates it, and renders it back with secrets redacted.
//
// The key names are a public contract (docs/config.md lists them): add
// keys, never rename them.
package config

import (
	"time"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/format/formatopts"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/registry"
	"github.com/spillway/spillway/internal/source/sourceopts"
	"github.com/spillway/spillway/internal/storage"
)

// Config is the whole effective configuration.
type Config struct {
	Kafka   Kafka   `koanf:"kafka"`
	Storage Storage `koanf:"storage"`
	File    File    `koanf:"file"`
	Format  Format  `koanf:"format"`
	// SchemaRegistry types keys and values in the Confluent wire format
	// by their registered schemas (see docs/design.md, "Schema registry").
	SchemaRegistry registry.Options `koanf:"schema_registry"`
	Backpressure   Backpressure     `koanf:"backpressure"`
	Errors         Errors           `koanf:"errors"`
	Iceberg        iceberg.Options  `koanf:"iceberg"`
	Admin          admin.Options    `koanf:"admin"`
	Log            Log              `koanf:"log"`
	Shutdown       Shutdown         `koanf:"shutdown"`
}

// Kafka is the source: the consumer group and how to reach the brokers;
// package sourceopts' options, which it validates.
type Kafka = sourceopts.Options

// TLS configures the connection to the brokers.
type TLS = sourceopts.TLS

// SASL configures broker authentication.
type SASL = sourceopts.SASL

// Storage is where files go: package storage's section, which it
// validates.
type Storage = storage.Config

// File decides how records are grouped into files.
type File struct {
	NameTemplate string `koanf:"name_template"`
	// TimestampSource is what {{timestamp}} renders: "wallclock", the
	// time a file is opened, or "event", the timestamp of its first record.
	TimestampSource string `koanf:"timestamp_source"`
	// Timezone is the IANA time zone {{timestamp}} renders in.
	Timezone string `koanf:"timezone"`
	// Extension ends every data file's name: "auto" is the format's and
	// the compression's (".jsonl.gz"); anything else is written as it is,
	// "" for none, so that names can follow another product's rules
	// (Aiven's ".gz", Confluent's ".snappy.parquet").
	Extension  string        `koanf:"extension"`
	MaxRecords int64         `koanf:"max_records"`
	MaxBytes   Size          `koanf:"max_bytes"`
	MaxAge     time.Duration `koanf:"max_age"`
}

// Format decides how records are encoded: package format's options,
// which it validates.
type Format = formatopts.Options

// DefaultBytesSeparator is format.bytes_separator's default.
const DefaultBytesSeparator = formatopts.DefaultBytesSeparator

// Backpressure bounds memory, and local disk when a spool is set.
type Backpressure struct {
	MemoryLimit        string `koanf:"memory_limit"` // "auto" or a size
	MaxBufferedRecords int64  `koanf:"max_buffered_records"`
	MaxOpenFiles       int    `koanf:"max_open_files"`
	// SpoolDir, when set, is a local directory where open files stage
	// their records until they close (package spool); "" keeps them in
	// memory.
	SpoolDir string `koanf:"spool_dir"`
	// DiskLimit bounds what the spool holds: "auto" (80% of the space
	// free on spool_dir's file system at start) or a size.
	DiskLimit string `koanf:"disk_limit"`
}

// Errors is the policy for records that can't be written.
type Errors struct {
	Tolerance       string `koanf:"tolerance"` // none | all
	DeadLetterTopic string `koanf:"dead_letter_topic"`
	NullValues      string `koanf:"null_values"` // write | ignore | fail
}

// Log configures logging.
type Log struct {
	Level  string `koanf:"level"`  // debug | info | warn | error
	Format string `koanf:"format"` // text | json
}

// Shutdown bounds a graceful stop.
type Shutdown struct {
	Timeout time.Duration `koanf:"timeout"`
}
