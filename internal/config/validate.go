package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/bytesize"
	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/redact"
	"github.com/spillway/spillway/internal/storage"
)

// The accepted values of enumerated keys. Load matches them
// case-insensitively and stores them in the case given here.
var (
	storageSchemes = []string{"file", "mem", "s3", "gs", "azblob"}
	tolerances     = []string{"none", "all"}
	nullPolicies   = []string{"write", "ignore", "fail"}
	logLevels      = []string{"debug", "info", "warn", "error"}
	logFormats     = []string{"text", "json"}
	// What {{timestamp}} renders, as Aiven's file.name.timestamp.source.
	timestampSources = []string{"wallclock", "event"}
)

// Limits below which a setting can't work well.
const (
	minPartSize    = 64 * KiB
	minS3PartSize  = 5 * MiB // S3 rejects smaller multipart parts (all but the last)
	maxConcurrency = 64
	maxRetries     = 50 // with 15 s waits, over 12 minutes of retrying
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

const storageURLHint = "set it to a gocloud URL such as file:///var/lib/spillway/out or s3://bucket?region=us-east-1"

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
	c.Storage.check(&ps)
	c.File.check(&ps)
	c.checkStateDir(&ps)
	c.checkParts(&ps)
	ps.absorb("format", c.Format.Validate())
	ps.absorb("schema_registry", c.SchemaRegistry.Validate())
	c.Backpressure.check(&ps)

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

func (s *Storage) check(ps *problems) {
	scheme := s.checkURL(ps)
	if err := naming.CheckPrefix(s.Prefix); err != nil {
		ps.add("storage.prefix", s.Prefix, "%v", err)
	}
	switch {
	case s.PartSize < minPartSize:
		ps.add("storage.part_size", s.PartSize.String(), "is too small; use at least %s", minPartSize)
	case scheme == "s3" && s.PartSize < minS3PartSize:
		ps.add("storage.part_size", s.PartSize.String(), "is too small for s3: S3 parts must be at least %s; use %s or more, such as 8MiB", minS3PartSize, minS3PartSize)
	}
	if s.UploadConcurrency < 1 || s.UploadConcurrency > maxConcurrency {
		ps.add("storage.upload_concurrency", strconv.Itoa(s.UploadConcurrency), "is out of range; use 1 to %d", maxConcurrency)
	}
	if scheme == "s3" {
		if u, err := url.Parse(s.URL); err == nil && u.Query().Has(storage.StorageClassParam) {
			if err := storage.CheckStorageClass(u.Query().Get(storage.StorageClassParam)); err != nil {
				ps.add("storage.url", redact.URL(s.URL), "%v", err)
			}
		}
	}
	if s.MaxRetries < 0 || s.MaxRetries > maxRetries {
		ps.add("storage.max_retries", strconv.Itoa(s.MaxRetries), "is out of range; use 0 (fail on the first error) to %d", maxRetries)
	}
	ps.oneOf("storage.topic_id_change", s.TopicIDChange, []string{"fail", "start_fresh"})
	ps.oneOf("storage.earlier_files", s.EarlierFiles, []string{"none", "spillway", "foreign"})
	ps.oneOf("storage.conditional_writes", s.ConditionalWrites, []string{"required", "unsafe_ignore"})
}

// checkURL validates storage.url and returns its scheme. Values are shown
// redacted: the URL may carry credentials.
func (s *Storage) checkURL(ps *problems) string {
	const key = "storage.url"
	if strings.TrimSpace(s.URL) == "" {
		ps.add(key, "", "required; %s", storageURLHint)
		return ""
	}
	shown := redact.URL(s.URL)
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		// url.Parse's message quotes the URL unredacted, so it is not shown.
		ps.add(key, shown, "is not a valid URL; %s", storageURLHint)
		return ""
	case u.Scheme == "":
		hint := storageURLHint
		if strings.HasPrefix(s.URL, "/") {
			hint = "for a local directory use file://" + shown
		}
		ps.add(key, shown, "has no scheme; %s", hint)
		return ""
	case !slices.Contains(storageSchemes, u.Scheme):
		ps.add(key, shown, "has scheme %s, which is not supported; use %s", u.Scheme, orList(storageSchemes))
	case u.Scheme == "file":
		checkFileURL(ps, u, shown)
	case u.Scheme != "file" && u.Scheme != "mem" && u.Host == "":
		ps.add(key, shown, "has no bucket or container name; use a form such as %s://NAME", u.Scheme)
	}
	return u.Scheme
}

// fileURLForms says how to write a local directory in storage.url.
const fileURLForms = "write an absolute directory as file:///var/lib/spillway/out (three slashes), or one relative to the working directory as file:out"

// checkFileURL checks a file: storage.url, after resolveFileURL. Go's URL
// parser reads file://relative/dir as the host "relative" and the path
// /dir, and storage would write to /dir: a host is refused, with the two
// forms that say what was meant.
func checkFileURL(ps *problems, u *url.URL, shown string) {
	const key = "storage.url"
	switch {
	case u.User != nil:
		ps.add(key, shown, "has a user name or password, which a file URL can't have; %s", fileURLForms)
	case u.Host != "" && u.Host != "localhost": // file://localhost/x is /x (RFC 8089)
		where := "; " + fileURLForms
		if rel := strings.TrimSuffix(u.Host+u.EscapedPath(), "/"); rel != "" && !strings.ContainsAny(u.Host, ":[]") {
			abs := "for /" + rel + " write file:///" + rel
			if strings.HasPrefix(u.Host, ".") { // file://./out: only the relative reading makes sense
				abs = "for an absolute one write file:///var/lib/spillway/out"
			}
			where = fmt.Sprintf("; for the directory %s under the working directory write file:%s, %s", rel, rel, abs)
			if u.Path != "" {
				where = fmt.Sprintf(" (files would go to %s)%s", u.Path, where)
			}
		}
		ps.add(key, shown, "names the host %q, which a file URL can't have%s", u.Host, where)
	case u.Fragment != "" || u.RawQuery != "" || u.ForceQuery:
		// A # or ? in a directory's name starts a fragment or a query:
		// the files would go to the directory named before it.
		ps.add(key, shown, "has a query or fragment (? or #), which a file URL doesn't use: files would go to %s; if the directory's name holds ? or #, write them as %%3F and %%23", u.Path+u.Opaque)
	case strings.HasPrefix(u.Opaque, "~"):
		ps.add(key, shown, "starts with ~, which is not expanded to a home directory; write the absolute path, such as file:///home/me/out")
	case u.Opaque != "":
		// Load resolves a relative path; a Config built in code must
		// give an absolute one.
		ps.add(key, shown, "has a relative path; write an absolute one such as file:///var/lib/spillway/out")
	case u.Path == "":
		ps.add(key, shown, "has no path; %s", fileURLForms)
	}
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
	loc, err := naming.LoadLocation(f.Timezone)
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

func orList(xs []string) string { return keycheck.OrList(xs) }
