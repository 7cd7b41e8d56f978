package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/bytesize"
	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
	"github.com/spillway/spillway/internal/storage"
)

// The accepted values of enumerated keys. Load matches them
// case-insensitively and stores them in the case given here.
var (
	tolerances   = []string{"none", "all"}
	nullPolicies = []string{"write", "ignore", "fail"}
	logLevels    = []string{"debug", "info", "warn", "error"}
	logFormats   = []string{"text", "json"}
	// What {{timestamp}} renders, as Aiven's file.name.timestamp.source.
	timestampSources = []string{"wallclock", "event"}
)

// Limits below which a setting can't work well.
const (
	minPartSize    = storage.MinPartSize
	minS3PartSize  = storage.MinS3PartSize
	minMaxBytes    = 1 * KiB
	minMaxAge      = time.Second
	minMemoryLimit = Size(budget.MinMemoryLimit)
)

// Object stores' limits on multipart uploads. S3 and Azure Blob cap an
// object's number of parts (blocks) and the size of one; GCS resumable
// uploads send chunks of a multiple of 256KiB, and its client rounds any
// other ChunkSize up to the next one, so the buffer each writer holds would
// be larger than part_size says and than the budget counts.
const (
	maxS3Parts        = 10_000
	maxS3PartSize     = 5 * GiB
	maxAzureBlocks    = 50_000
	maxAzureBlockSize = 4000 * MiB
	gcsChunkUnit      = 256 * KiB
)

// fileExtension is what file.extension accepts besides auto: nothing, or a
// suffix that keeps names safe on every store and can't add a directory.
var fileExtension = regexp.MustCompile(`^(\.[a-zA-Z0-9_-]+)*$`)

// topicName is what Kafka accepts as a topic name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// normalize puts enumerated values in their canonical case and
// memory_limit in its canonical form, so that the rest of Spillway compares
// plain strings. Values that match nothing are left as given, for Validate
// to report as the user wrote them.
func (c *Config) normalize() {
	c.Kafka.Normalize()
	c.Format.Normalize()
	c.Errors.Tolerance = canon(c.Errors.Tolerance, tolerances)
	c.Errors.NullValues = canon(c.Errors.NullValues, nullPolicies)
	c.Log.Level = canon(c.Log.Level, logLevels)
	c.Log.Format = canon(c.Log.Format, logFormats)
	c.SchemaRegistry.Normalize()
	c.normalizeIceberg()
	c.Storage.URL = resolveFileURL(c.Storage.URL)
	c.File.TimestampSource = canon(c.File.TimestampSource, timestampSources)
	if limit, auto, err := c.Backpressure.MemoryLimitBytes(); err == nil {
		if auto {
			c.Backpressure.MemoryLimit = "auto"
		} else {
			c.Backpressure.MemoryLimit = Size(limit).String()
		}
	}
	if limit, auto, err := c.Backpressure.DiskLimitBytes(); err == nil {
		if auto {
			c.Backpressure.DiskLimit = "auto"
		} else {
			c.Backpressure.DiskLimit = Size(limit).String()
		}
	}
	if d := strings.TrimSpace(c.Backpressure.SpoolDir); d != "" {
		// As storage.url's local directory: config check shows where.
		if abs, err := filepath.Abs(d); err == nil {
			c.Backpressure.SpoolDir = abs
		}
	}
	c.ApplyIcebergLayout()
}

// resolveFileURL turns a relative local directory, file:out or file:./out,
// into the absolute file:///cwd/out, so that the effective config (and
// `config check`) shows where files will land, and storage, which reads
// only absolute paths, gets one. Anything else is returned as it is.
func resolveFileURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "file" || u.Opaque == "" || strings.HasPrefix(u.Opaque, "~") {
		return raw
	}
	p, err := url.PathUnescape(u.Opaque)
	if err != nil {
		return raw
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return raw
	}
	u.Opaque, u.Path, u.RawPath = "", abs, ""
	return u.String()
}

func canon(v string, allowed []string) string { return keycheck.Canon(v, allowed) }

// Validate reports every problem with c as an *Error, or nil. Load calls
// it; call it again after changing a loaded Config (from flags, say).
// Enumerated values must be in canonical case here (Load normalizes them).
func (c *Config) Validate() error { return c.problems().err() }

func (c *Config) problems() problems {
	var ps problems
	ps.absorb("kafka", c.Kafka.Validate())
	ps.absorb("storage", c.Storage.Validate())
	c.File.check(&ps)
	c.checkStateDir(&ps)
	c.checkParts(&ps)
	ps.absorb("format", c.Format.Validate())
	ps.absorb("schema_registry", c.SchemaRegistry.Validate())
	c.Backpressure.check(&ps)
	ps.absorb("iceberg", c.Iceberg.Validate())
	c.checkIceberg(&ps)

	ps.oneOf("errors.tolerance", c.Errors.Tolerance, tolerances)
	if t := c.Errors.DeadLetterTopic; t != "" && !topicName.MatchString(t) {
		ps.add("errors.dead_letter_topic", t, "is not a valid topic name; use 1 to 249 letters, digits, '.', '_' or '-', or \"\" for none")
	}
	ps.oneOf("errors.null_values", c.Errors.NullValues, nullPolicies)
	ps.absorb("admin", c.Admin.Validate())
	ps.oneOf("log.level", c.Log.Level, logLevels)
	ps.oneOf("log.format", c.Log.Format, logFormats)
	if c.Shutdown.Timeout <= 0 {
		ps.add("shutdown.timeout", c.Shutdown.Timeout.String(), "must be positive; use a duration such as 30s")
	}
	return ps
}

// checkParts checks storage.part_size against the store's multipart limits
// and file.max_bytes: a file whose upload needs more parts than the store
// allows would fail at its last part, every time, after its records were
// fetched. Part sizes already refused by Storage.check are not reported
// again.
func (c *Config) checkParts(ps *problems) {
	const key = "storage.part_size"
	part := c.Storage.PartSize
	u, err := url.Parse(c.Storage.URL)
	if err != nil || part < minPartSize {
		return
	}
	var store string
	var maxParts int64
	var maxPart Size
	switch u.Scheme {
	case "s3":
		if part < minS3PartSize {
			return
		}
		store, maxParts, maxPart = "S3", maxS3Parts, maxS3PartSize
	case "azblob":
		store, maxParts, maxPart = "Azure Blob", maxAzureBlocks, maxAzureBlockSize
	case "gs":
		if part%gcsChunkUnit != 0 {
			down := part / gcsChunkUnit * gcsChunkUnit
			ps.add(key, part.String(), "is not a multiple of %s: GCS uploads in chunks of multiples of %s and would round it up, holding more memory than counted; use %s or %s",
				gcsChunkUnit, gcsChunkUnit, max(down, minPartSize), down+gcsChunkUnit)
		}
		return
	default:
		return
	}
	if part > maxPart {
		ps.add(key, part.String(), "is too large for %s: a part can be at most %s; use a size such as 8MiB", u.Scheme, maxPart)
		return
	}
	// One part is kept spare: the record that carries a file past
	// max_bytes is written whole, and the compressor's last block with it.
	usable := maxParts - 1
	if c.File.MaxBytes < minMaxBytes || int64(c.File.MaxBytes) <= int64(part)*usable {
		return
	}
	need := (int64(c.File.MaxBytes) + usable - 1) / usable
	need = (need + int64(MiB) - 1) / int64(MiB) * int64(MiB)
	most := int64(part) * usable / int64(MiB) * int64(MiB) // a round figure to suggest
	ps.add(key, part.String(), "is too small for file.max_bytes %s: %s allows %d parts per object (one is kept spare for the record that carries a file past max_bytes); use at least %s, or set file.max_bytes to at most %s",
		c.File.MaxBytes, store, maxParts, Size(need), Size(most))
}

func (f *File) check(ps *problems) {
	// Package naming owns the template rules (which variables a template
	// needs, and what makes names collide); its message quotes the
	// template and says what is wrong.
	loc, err := partvalue.LoadLocation(f.Timezone)
	if err != nil {
		why := "is not a known time zone"
		switch f.Timezone {
		case "":
			why = "is empty"
		case "Local":
			why = "is the machine's own zone, which can differ between instances"
		}
		ps.add("file.timezone", f.Timezone, "%s; use an IANA name such as UTC or Europe/Berlin, or a UTC offset such as +02:00", why)
	}
	if _, err := naming.Parse(f.NameTemplate, naming.Location(loc)); err != nil {
		ps.add("file.name_template", "", "%s", err.Error())
	}
	ps.oneOf("file.timestamp_source", f.TimestampSource, timestampSources)
	if f.Extension != "auto" && !fileExtension.MatchString(f.Extension) {
		ps.add("file.extension", f.Extension, "is not a file name extension; use auto (the format's and compression's, such as .jsonl.gz), \"\" for none, or a suffix of letters, digits, '.', '_' and '-' starting with '.', such as .gz or .snappy.parquet")
	}
	if f.MaxRecords < 0 {
		ps.add("file.max_records", strconv.FormatInt(f.MaxRecords, 10), "can't be negative; use 0 for no limit")
	}
	if f.MaxBytes < minMaxBytes {
		ps.add("file.max_bytes", f.MaxBytes.String(), "is too small; use at least %s", minMaxBytes)
	}
	if f.MaxAge < minMaxAge {
		ps.add("file.max_age", f.MaxAge.String(), "is too short; use at least %s", minMaxAge)
	}
}

func (b *Backpressure) check(ps *problems) {
	const key = "backpressure.memory_limit"
	if strings.TrimSpace(b.MemoryLimit) == "" {
		ps.add(key, "", "is empty; use auto or a size of at least %s such as 1GiB", minMemoryLimit)
	} else if limit, auto, err := b.MemoryLimitBytes(); err != nil {
		var se *bytesize.Error
		if errors.As(err, &se) {
			ps.add(key, b.MemoryLimit, "is not auto or a size; %s", se.Hint)
		} else {
			ps.add(key, b.MemoryLimit, "is not auto or a size")
		}
	} else if !auto && Size(limit) < minMemoryLimit {
		ps.add(key, b.MemoryLimit, "is too small; use auto or at least %s", minMemoryLimit)
	}
	if b.MaxBufferedRecords < 0 {
		ps.add("backpressure.max_buffered_records", strconv.FormatInt(b.MaxBufferedRecords, 10), "can't be negative; use 0 to derive it from the memory limit")
	}
	if b.MaxOpenFiles < 0 {
		ps.add("backpressure.max_open_files", strconv.Itoa(b.MaxOpenFiles), "can't be negative; use 0 to derive it from the memory limit")
	}
	b.checkSpool(ps)
}

func (b *Backpressure) checkSpool(ps *problems) {
	const key = "backpressure.disk_limit"
	if limit, auto, err := b.DiskLimitBytes(); err != nil {
		var se *bytesize.Error
		if errors.As(err, &se) && strings.TrimSpace(b.DiskLimit) != "" {
			ps.add(key, b.DiskLimit, "is not auto or a size; %s", se.Hint)
		} else {
			ps.add(key, b.DiskLimit, "is not auto or a size; use auto, or a size of at least %s such as 20GiB", MinDiskLimit)
		}
	} else if !auto && Size(limit) < MinDiskLimit {
		ps.add(key, b.DiskLimit, "is too small; use auto or at least %s", MinDiskLimit)
	}
	if b.SpoolDir == "" {
		return
	}
	if err := SpoolDirUsable(b.SpoolDir); err != nil {
		ps.add("backpressure.spool_dir", b.SpoolDir, "%v; give a local directory Spillway can create and write, or \"\" to keep open files in memory", err)
	}
}

// SpoolDirUsable reports why dir can't hold a spool: it exists and can't
// be written, or it doesn't and can't be created. It creates nothing, so
// that config check leaves no trace; a probe file is created and removed
// in a directory that exists.
func SpoolDirUsable(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return errors.New("is not a directory")
	case err == nil:
		f, err := os.CreateTemp(dir, ".spillway-probe-*")
		if err != nil {
			return fmt.Errorf("can't be written: %w", unwrapPath(err))
		}
		f.Close()
		return os.Remove(f.Name())
	case !missing(err):
		return fmt.Errorf("can't be read: %w", unwrapPath(err))
	}
	// The nearest directory that exists must let it be created: a probe
	// directory is created there and removed.
	parent := filepath.Dir(dir)
	for {
		fi, err := os.Stat(parent)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("can't be created: %s is not a directory", parent)
			}
			p, err := os.MkdirTemp(parent, ".spillway-probe-*")
			if err != nil {
				return fmt.Errorf("can't be created in %s: %w", parent, unwrapPath(err))
			}
			return os.Remove(p)
		}
		if !missing(err) || parent == filepath.Dir(parent) {
			return fmt.Errorf("can't be created: %w", unwrapPath(err))
		}
		parent = filepath.Dir(parent)
	}
}

// missing: a path or one of its parents does not exist, or a parent is a
// file.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// oneOf reports v unless it is one of allowed.
func (ps *problems) oneOf(key, v string, allowed []string) {
	(*keycheck.List)(ps).OneOf(key, v, allowed)
}
