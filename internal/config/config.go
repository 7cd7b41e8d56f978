// Package config loads Spillway's configuration from YAML and the
// environment, validates it, and renders it back with secrets redacted.
//
// The key names are a public contract (docs/config.md lists them): add
// keys, never rename them.
package config

import (
	"time"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/registry"
)

// Size is a byte count. In YAML and the environment it takes units:
// "64MiB", "1GB", "512KiB" or a bare number of bytes.
type Size int64

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

// Kafka is the source: the consumer group and how to reach the brokers.
type Kafka struct {
	Brokers     []string `koanf:"brokers"`
	Group       string   `koanf:"group"`
	Topics      []string `koanf:"topics"`
	TopicRegex  string   `koanf:"topic_regex"`
	StartOffset string   `koanf:"start_offset"` // earliest | latest
	ClientID    string   `koanf:"client_id"`
	// InstanceID turns on static membership (KIP-345): a restarted
	// instance with the same id takes its partitions back at once, with
	// no rebalance, instead of waiting out the old member's session.
	InstanceID string `koanf:"instance_id"`
	// SessionTimeout is how long the group waits for a silent member
	// before giving its partitions to others.
	SessionTimeout time.Duration `koanf:"session_timeout"`
	// StartupTimeout bounds the check at start that the brokers answer,
	// accept the credentials and hold the topics: a setup that can't work
	// stops with what to fix instead of idling.
	StartupTimeout time.Duration `koanf:"startup_timeout"`
	TLS            TLS           `koanf:"tls"`
	SASL           SASL          `koanf:"sasl"`
}

// TLS configures the connection to the brokers.
type TLS struct {
	Enabled  bool   `koanf:"enabled"`
	CAFile   string `koanf:"ca_file"`
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// SASL configures broker authentication.
type SASL struct {
	Mechanism string `koanf:"mechanism"` // "" | PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
	Username  string `koanf:"username"`
	Password  string `koanf:"password"` // secret
}

// Storage is where files go.
type Storage struct {
	URL               string `koanf:"url"`
	Prefix            string `koanf:"prefix"`
	PartSize          Size   `koanf:"part_size"`
	UploadConcurrency int    `koanf:"upload_concurrency"`
	// MaxRetries is how many times one storage request that failed for a
	// reason that may pass (throttling, 5xx, timeout, reset) is retried,
	// with capped exponential backoff, before the error stops the run.
	MaxRetries int `koanf:"max_retries"`
	// TopicIDChange says what to do when storage.prefix holds a ledger of
	// another id of a topic (it was deleted and recreated): fail, or
	// start_fresh with a new ledger beside the old one.
	TopicIDChange string `koanf:"topic_id_change"`
	// EarlierFiles says who wrote data files that no ledger entry names:
	// "none" (the default), nobody Spillway can account for: such files
	// never move a resume point, and verify reports them; "spillway", an
	// earlier version from before the ledger, whose last file resume
	// reads back (or stops), asked for by name; or "foreign", another
	// writer such as Kafka Connect before a cut-over, whose files are left
	// alone: a partition without a ledger starts at the group's committed
	// offset, and verify counts those files apart instead of reporting
	// them.
	EarlierFiles string `koanf:"earlier_files"`
	// ConditionalWrites says what to do when the startup check finds
	// that the store ignores create-only writes (an S3-compatible store
	// without If-None-Match): "required" stops with exit 1;
	// "unsafe_ignore" runs without the fencing and the protection of
	// foreign objects they give, with a warning.
	ConditionalWrites string `koanf:"conditional_writes"`
}

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

// Format decides how records are encoded.
type Format struct {
	Type          string   `koanf:"type"`        // csv | json | jsonl | avro | parquet | bytes
	Compression   string   `koanf:"compression"` // none | gzip | snappy | zstd
	Fields        []string `koanf:"fields"`      // key, value, offset, timestamp, headers
	ValueEncoding string   `koanf:"value_encoding"`
	Envelope      bool     `koanf:"envelope"`
	// BytesSeparator follows each value in the bytes format, with
	// backslash escapes; see Separator.
	BytesSeparator string `koanf:"bytes_separator"`
	// Micros, no key of its own, is set with iceberg.table (see
	// ApplyIcebergLayout): Parquet timestamps and times in microseconds,
	// Iceberg's unit, instead of milliseconds.
	Micros bool `koanf:"-"`
}

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
