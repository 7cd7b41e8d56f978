package storage

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spillway/spillway/internal/bytesize"
	"github.com/spillway/spillway/internal/keycheck"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/redact"
	"github.com/spillway/spillway/internal/storage/remote"
)

// Limits of the section's keys.
const (
	// MinPartSize is the smallest storage.part_size.
	MinPartSize = 64 * bytesize.KiB
	// MinS3PartSize is the smallest on S3, which rejects smaller
	// multipart parts (all but the last).
	MinS3PartSize  = 5 * bytesize.MiB
	maxConcurrency = 64
	maxRetries     = 50 // with 15 s waits, over 12 minutes of retrying
)

// storageSchemes are the storage.url schemes Spillway opens.
var storageSchemes = []string{"file", "mem", "s3", "gs", "azblob"}

const storageURLHint = "set it to a gocloud URL such as file:///var/lib/spillway/out or s3://bucket?region=us-east-1"

// Config is the storage section of the config: where files go (Options
// are what Open takes from it and from the run). Package config embeds it;
// Validate checks it.
type Config struct {
	URL               string        `koanf:"url"`
	Prefix            string        `koanf:"prefix"`
	PartSize          bytesize.Size `koanf:"part_size"`
	UploadConcurrency int           `koanf:"upload_concurrency"`
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

// Validate reports every problem of the section as a *keycheck.Error, or
// nil. A file: URL must be absolute here (config's Load resolves a
// relative one). Values of storage.url are shown redacted.
func (s *Config) Validate() error {
	var ps keycheck.List
	s.check(&ps)
	return ps.Err()
}

func (s *Config) check(ps *keycheck.List) {
	scheme := s.checkURL(ps)
	if err := naming.CheckPrefix(s.Prefix); err != nil {
		ps.Add("storage.prefix", s.Prefix, "%v", err)
	}
	switch {
	case s.PartSize < MinPartSize:
		ps.Add("storage.part_size", s.PartSize.String(), "is too small; use at least %s", MinPartSize)
	case scheme == "s3" && s.PartSize < MinS3PartSize:
		ps.Add("storage.part_size", s.PartSize.String(), "is too small for s3: S3 parts must be at least %s; use %s or more, such as 8MiB", MinS3PartSize, MinS3PartSize)
	}
	if s.UploadConcurrency < 1 || s.UploadConcurrency > maxConcurrency {
		ps.Add("storage.upload_concurrency", strconv.Itoa(s.UploadConcurrency), "is out of range; use 1 to %d", maxConcurrency)
	}
	if scheme == "s3" {
		if u, err := url.Parse(s.URL); err == nil && u.Query().Has(remote.StorageClassParam) {
			if err := remote.CheckStorageClass(u.Query().Get(remote.StorageClassParam)); err != nil {
				ps.Add("storage.url", redact.URL(s.URL), "%v", err)
			}
		}
	}
	if s.MaxRetries < 0 || s.MaxRetries > maxRetries {
		ps.Add("storage.max_retries", strconv.Itoa(s.MaxRetries), "is out of range; use 0 (fail on the first error) to %d", maxRetries)
	}
	ps.OneOf("storage.topic_id_change", s.TopicIDChange, []string{"fail", "start_fresh"})
	ps.OneOf("storage.earlier_files", s.EarlierFiles, []string{"none", "spillway", "foreign"})
	ps.OneOf("storage.conditional_writes", s.ConditionalWrites, []string{"required", "unsafe_ignore"})
}

// checkURL validates storage.url and returns its scheme. Values are shown
// redacted: the URL may carry credentials.
func (s *Config) checkURL(ps *keycheck.List) string {
	const key = "storage.url"
	if strings.TrimSpace(s.URL) == "" {
		ps.Add(key, "", "required; %s", storageURLHint)
		return ""
	}
	shown := redact.URL(s.URL)
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		// url.Parse's message quotes the URL unredacted, so it is not shown.
		ps.Add(key, shown, "is not a valid URL; %s", storageURLHint)
		return ""
	case u.Scheme == "":
		hint := storageURLHint
		if strings.HasPrefix(s.URL, "/") {
			hint = "for a local directory use file://" + shown
		}
		ps.Add(key, shown, "has no scheme; %s", hint)
		return ""
	case !slices.Contains(storageSchemes, u.Scheme):
		ps.Add(key, shown, "has scheme %s, which is not supported; use %s", u.Scheme, keycheck.OrList(storageSchemes))
	case u.Scheme == "file":
		checkFileURL(ps, u, shown)
	case u.Scheme != "file" && u.Scheme != "mem" && u.Host == "":
		ps.Add(key, shown, "has no bucket or container name; use a form such as %s://NAME", u.Scheme)
	}
	return u.Scheme
}

// fileURLForms says how to write a local directory in storage.url.
const fileURLForms = "write an absolute directory as file:///var/lib/spillway/out (three slashes), or one relative to the working directory as file:out"

// checkFileURL checks a file: storage.url, after resolveFileURL. Go's URL
// parser reads file://relative/dir as the host "relative" and the path
// /dir, and storage would write to /dir: a host is refused, with the two
// forms that say what was meant.
func checkFileURL(ps *keycheck.List, u *url.URL, shown string) {
	const key = "storage.url"
	switch {
	case u.User != nil:
		ps.Add(key, shown, "has a user name or password, which a file URL can't have; %s", fileURLForms)
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
		ps.Add(key, shown, "names the host %q, which a file URL can't have%s", u.Host, where)
	case u.Fragment != "" || u.RawQuery != "" || u.ForceQuery:
		// A # or ? in a directory's name starts a fragment or a query:
		// the files would go to the directory named before it.
		ps.Add(key, shown, "has a query or fragment (? or #), which a file URL doesn't use: files would go to %s; if the directory's name holds ? or #, write them as %%3F and %%23", u.Path+u.Opaque)
	case strings.HasPrefix(u.Opaque, "~"):
		ps.Add(key, shown, "starts with ~, which is not expanded to a home directory; write the absolute path, such as file:///home/me/out")
	case u.Opaque != "":
		// Load resolves a relative path; a Config built in code must
		// give an absolute one.
		ps.Add(key, shown, "has a relative path; write an absolute one such as file:///var/lib/spillway/out")
	case u.Path == "":
		ps.Add(key, shown, "has no path; %s", fileURLForms)
	}
}
