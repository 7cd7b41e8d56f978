package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/hostport"
	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/redact"
	"github.com/spillway/spillway/internal/storage"
)

// The accepted values of enumerated keys. Load matches them
// case-insensitively and stores them in the case given here.
var (
	startOffsets   = []string{"earliest", "latest"}
	saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
	storageSchemes = []string{"file", "mem", "s3", "gs", "azblob"}
	compressions   = []string{"none", "gzip", "snappy", "zstd"}
	fieldNames     = []string{"key", "value", "offset", "timestamp", "headers"}
	valueEncodings = []string{"none", "base64"}
	tolerances     = []string{"none", "all"}
	nullPolicies   = []string{"write", "ignore", "fail"}
	logLevels      = []string{"debug", "info", "warn", "error"}
	logFormats     = []string{"text", "json"}
	// What {{timestamp}} renders, as Aiven's file.name.timestamp.source.
	timestampSources = []string{"wallclock", "event"}
)

// formats is every format.type name, in the order messages list them.
// built says whether this binary can write it: a planned format is refused
// by validation, so that `config check` and `run` agree, and is turned on
// here, by this one flag, once internal/format has its encoder.
var formats = []struct {
	name  string
	built bool
}{
	{"jsonl", true},
	{"json", true},
	{"csv", true},
	{"bytes", true},
	{"avro", true},
	{"parquet", true},
}

// formatNames lists the names in formats that are built, or planned.
func formatNames(built bool) []string {
	var out []string
	for _, f := range formats {
		if f.built == built {
			out = append(out, f.name)
		}
	}
	return out
}

// Limits below which a setting can't work well.
const (
	minPartSize    = 64 * KiB
	minS3PartSize  = 5 * MiB // S3 rejects smaller multipart parts (all but the last)
	maxConcurrency = 64
	maxRetries     = 50 // with 15 s waits, over 12 minutes of retrying
	minMaxBytes    = 1 * KiB
	minMaxAge      = time.Second
	minMemoryLimit = Size(budget.MinMemoryLimit)
	// Kafka brokers' default group.min.session.timeout.ms and
	// group.max.session.timeout.ms: outside them every join is refused.
	minSessionTimeout = 6 * time.Second
	maxSessionTimeout = 30 * time.Minute
	// Below a second a healthy but distant cluster fails the startup check;
	// past an hour a setup that can't work idles as if it could.
	minStartupTimeout = time.Second
	maxStartupTimeout = time.Hour
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
	c.Kafka.StartOffset = canon(c.Kafka.StartOffset, startOffsets)
	c.Kafka.SASL.Mechanism = canon(c.Kafka.SASL.Mechanism, saslMechanisms)
	c.Format.Type = canon(c.Format.Type, append(formatNames(true), formatNames(false)...))
	c.Format.Compression = canon(c.Format.Compression, compressions)
	for i, f := range c.Format.Fields {
		c.Format.Fields[i] = canon(f, fieldNames)
	}
	c.Format.ValueEncoding = canon(c.Format.ValueEncoding, valueEncodings)
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
	c.Kafka.check(&ps)
	c.Storage.check(&ps)
	c.File.check(&ps)
	c.checkStateDir(&ps)
	c.checkParts(&ps)
	c.Format.check(&ps)
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

func (k *Kafka) check(ps *problems) {
	if len(k.Brokers) == 0 {
		ps.add("kafka.brokers", "", "required; list at least one broker as host:port, such as [\"127.0.0.1:9092\"]")
	}
	for _, b := range k.Brokers {
		if err := hostport.Dial(b); err != nil {
			ps.add("kafka.brokers", b, "%v; use host:port such as 127.0.0.1:9092", err)
		}
	}
	if strings.TrimSpace(k.Group) == "" {
		ps.add("kafka.group", "", "required; set the consumer group name, such as spillway")
	}
	if k.InstanceID != "" && !topicName.MatchString(k.InstanceID) {
		ps.add("kafka.instance_id", k.InstanceID, "is not a valid group instance id; use 1 to 249 letters, digits, '.', '_' or '-', unique per instance, such as the pod name")
	}
	if k.SessionTimeout < minSessionTimeout || k.SessionTimeout > maxSessionTimeout {
		ps.add("kafka.session_timeout", k.SessionTimeout.String(), "is outside what brokers accept by default; use a duration from %s to %s, such as 45s", minSessionTimeout, maxSessionTimeout)
	}
	if k.StartupTimeout < minStartupTimeout || k.StartupTimeout > maxStartupTimeout {
		ps.add("kafka.startup_timeout", k.StartupTimeout.String(), "is out of range; use a duration from %s to %s, such as 60s", minStartupTimeout, maxStartupTimeout)
	}

	switch {
	case len(k.Topics) == 0 && k.TopicRegex == "":
		ps.add("kafka.topics", "", `required; list the topics to consume, such as ["events"], or set kafka.topic_regex to a pattern such as "events\\..*"`)
	case len(k.Topics) > 0 && k.TopicRegex != "":
		ps.add("kafka.topic_regex", k.TopicRegex, "is set as well as kafka.topics; set only one of the two")
	}
	for i, t := range k.Topics {
		switch {
		case !topicName.MatchString(t):
			ps.add("kafka.topics", t, "is not a valid topic name; use 1 to 249 letters, digits, '.', '_' or '-'")
		case slices.Index(k.Topics, t) < i:
			ps.add("kafka.topics", t, "is listed twice")
		}
	}
	if _, err := k.TopicPattern(); err != nil {
		var e *Error
		if errors.As(err, &e) {
			*ps = append(*ps, e.Problems...)
		}
	}

	ps.oneOf("kafka.start_offset", k.StartOffset, startOffsets)
	k.TLS.check(ps)
	k.SASL.check(ps)
}

// TopicPattern returns kafka.topic_regex compiled, or nil when it is unset.
// Validation, the consumer and verify all compile it here, so they agree
// on what it accepts and matches: like kgo.ConsumeRegex, it matches
// anywhere in a topic name unless anchored with ^ and $. A pattern that
// does not compile is an *Error naming the key.
func (k *Kafka) TopicPattern() (*regexp.Regexp, error) {
	if k.TopicRegex == "" {
		return nil, nil
	}
	re, err := regexp.Compile(k.TopicRegex)
	if err != nil {
		why := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) {
			why = se.Code.String()
		}
		return nil, &Error{Problems: []Problem{{Key: "kafka.topic_regex", Value: k.TopicRegex, Msg: "is not a valid regular expression: " + why}}}
	}
	return re, nil
}

func (t *TLS) check(ps *problems) {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.add("kafka.tls.key_file", "", "required when kafka.tls.cert_file is set: a client certificate needs its private key")
	case t.KeyFile != "" && t.CertFile == "":
		ps.add("kafka.tls.cert_file", "", "required when kafka.tls.key_file is set: a private key needs its client certificate")
	}
	files := []struct{ key, path string }{
		{"kafka.tls.ca_file", t.CAFile},
		{"kafka.tls.cert_file", t.CertFile},
		{"kafka.tls.key_file", t.KeyFile},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if !t.Enabled {
			ps.add(f.key, f.path, "is set but kafka.tls.enabled is false; set kafka.tls.enabled: true to use TLS")
		}
		switch fi, err := os.Stat(f.path); {
		case errors.Is(err, fs.ErrNotExist):
			ps.add(f.key, f.path, "does not exist; give the path of a PEM file")
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			ps.add(f.key, f.path, "can't be read: %v", err)
		case fi.IsDir():
			ps.add(f.key, f.path, "is a directory; give the path of a PEM file")
		}
	}
}

func (s *SASL) check(ps *problems) {
	if s.Mechanism == "" {
		if s.Username != "" || s.Password != "" {
			ps.add("kafka.sasl.mechanism", "", "required when kafka.sasl.username or password is set; use %s", orList(saslMechanisms))
		}
		return
	}
	if !slices.Contains(saslMechanisms, s.Mechanism) {
		ps.add("kafka.sasl.mechanism", s.Mechanism, "is not valid; use %s, or leave it empty for no authentication", orList(saslMechanisms))
	}
	if s.Username == "" {
		ps.add("kafka.sasl.username", "", "required when kafka.sasl.mechanism is set")
	}
	if s.Password == "" {
		ps.add("kafka.sasl.password", "", "required when kafka.sasl.mechanism is set")
	}
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

func (f *Format) check(ps *problems) {
	switch built, planned := formatNames(true), formatNames(false); {
	case slices.Contains(planned, f.Type):
		ps.add("format.type", f.Type, "is planned but not built in this version; use %s", orList(built))
	case f.Type == "":
		ps.add("format.type", "", "is empty; use %s", orList(built))
	case !slices.Contains(built, f.Type) && len(planned) == 0:
		ps.add("format.type", f.Type, "is not valid; use %s", orList(built))
	case !slices.Contains(built, f.Type):
		ps.add("format.type", f.Type, "is not valid; use %s (%s are planned)", orList(built), andList(planned))
	}
	ps.oneOf("format.compression", f.Compression, compressions)
	if len(f.Fields) == 0 {
		ps.add("format.fields", "", "required; list the record parts to write, such as [key, value, offset, timestamp, headers]")
	}
	for i, name := range f.Fields {
		switch {
		case !slices.Contains(fieldNames, name):
			ps.add("format.fields", name, "is not a field; use %s", orList(fieldNames))
		case slices.Index(f.Fields, name) < i:
			ps.add("format.fields", name, "is listed twice")
		}
	}
	ps.oneOf("format.value_encoding", f.ValueEncoding, valueEncodings)
	// A csv row and a bytes record have no envelope to leave out, so
	// format.envelope means nothing to them.
	envelope := f.Type != "csv" && f.Type != "bytes"
	if envelope && !f.Envelope && len(f.Fields) != 1 {
		ps.add("format.fields", "", "must list exactly one field when format.envelope is false (that field is written bare), such as [value]; it lists %d", len(f.Fields))
	}
	if f.Type == "bytes" {
		// The bytes format is the value alone, so a list that names other
		// fields asks for something it can't write; the default list (left
		// unset) and [value] are what it does.
		if len(f.Fields) > 0 && !slices.Equal(f.Fields, Default().Format.Fields) && !slices.Equal(f.Fields, []string{"value"}) {
			ps.add("format.fields", strings.Join(f.Fields, ", "), "can't be written by format.type bytes, which writes the value alone; set format.fields to [value] (or leave it unset), or use format.type csv or jsonl for other fields")
		}
	}
	if sep, err := f.Separator(); err != nil {
		ps.add("format.bytes_separator", f.BytesSeparator, "%v", err)
	} else if f.Type != "bytes" && string(sep) != "\n" {
		ps.add("format.bytes_separator", f.BytesSeparator, "is used only by format.type bytes; remove it, or set format.type: bytes")
	}
}

func (b *Backpressure) check(ps *problems) {
	const key = "backpressure.memory_limit"
	if strings.TrimSpace(b.MemoryLimit) == "" {
		ps.add(key, "", "is empty; use auto or a size of at least %s such as 1GiB", minMemoryLimit)
	} else if limit, auto, err := b.MemoryLimitBytes(); err != nil {
		var se *sizeError
		if errors.As(err, &se) {
			ps.add(key, b.MemoryLimit, "is not auto or a size; %s", se.hint)
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
		var se *sizeError
		if errors.As(err, &se) && strings.TrimSpace(b.DiskLimit) != "" {
			ps.add(key, b.DiskLimit, "is not auto or a size; %s", se.hint)
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

func orList(xs []string) string  { return keycheck.OrList(xs) }
func andList(xs []string) string { return keycheck.AndList(xs) }
