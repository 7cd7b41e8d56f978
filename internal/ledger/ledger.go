// Package ledger persists what is durable and resumes from it: the
// create-only entries under storage.prefix's _spillway/ledger/ that say
// which offsets each data file holds, where a partition resumes from them
// (Resume, Resumer), and the audit scan verify reads storage with (Scan).
package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

// Store is what the ledger, resume and the audit scan need of storage;
// *storage.Bucket is one, and each method keeps its contract (the one on
// storage's backend), which the ledger's exactly-once rests on.
type Store interface {
	// List calls fn for every visible object whose key starts with
	// prefix, as storage.Bucket.List: at most once each, in no promised
	// order, stopping at fn's first error. Writes in progress are never
	// shown; objects committed while it runs may or may not be.
	List(ctx context.Context, prefix string, fn func(storage.Object) error) error
	// ListDir calls fn, in lexical order, for each object and directory
	// level directly under prefix, as storage.Bucket.ListDir: its cost is
	// that of one level, which keeps finding the last entry cheap.
	ListDir(ctx context.Context, prefix string, fn func(storage.Object) error) error
	// Stat returns the object under key, ok=false when there is none, as
	// storage.Bucket.Stat: whether an entry's file was published.
	Stat(ctx context.Context, key string) (storage.Object, bool, error)
	// Read opens the object under key, as storage.Bucket.Read: only a
	// committed object is visible, and it is whole. The caller closes it.
	Read(ctx context.Context, key string) (io.ReadCloser, error)
	// Put stores a small object create-only and durably, as
	// storage.Bucket.Put: an error for which errors.Is(err,
	// storage.ErrExists) holds when key is taken, the object there left
	// as it was, so of two writers of one entry at most one succeeds. A
	// failed Put proves nothing: the entry may be stored all the same.
	Put(ctx context.Context, key string, data []byte, meta map[string]string) error
}

// StateDir is the directory, under storage.prefix, that holds Spillway's
// own state. Its leading underscore makes Hive, Spark, Athena, Trino and
// DuckDB's hive-partitioned globbing skip it, so tables over the prefix see
// data files only. naming.InStateDir keeps data files out of it.
const StateDir = naming.StateDir + "/"

// EntryVersion is the highest version of the ledger entry format this
// build reads. It writes version 1 where an entry has nothing newer, so
// that an older build can still resume from it: version 2 adds Gaps,
// entries without a file, the Deployment and the file's CRC-32C. An older
// build then refuses the entry by its version, saying so, instead of
// calling it corrupt.
const EntryVersion = 2

// seqDigits and seqLevel shape an entry's key: its sequence number, zero
// padded, split into directory levels of seqLevel digits. Finding the last
// entry lists one level at a time, at most 1,000 names each, so it costs
// the same few listings with ten entries as with millions.
const (
	seqDigits = 12
	seqLevel  = 3
)

// Identity names the log a ledger belongs to. A ledger written for another
// cluster or topic id is never resumed from: its offsets mean nothing for
// this log.
type Identity struct {
	Cluster   string // Kafka cluster id
	Topic     string
	TopicID   string // Kafka topic id (base64, as Kafka's tools print it)
	Partition int32
}

func (id Identity) String() string {
	return fmt.Sprintf("%s/%d (topic id %s, cluster %s)", id.Topic, id.Partition, id.TopicID, id.Cluster)
}

// FileInfo describes one data file in its ledger entry.
type FileInfo struct {
	Key string `json:"key"`
	// Ranges are the offsets the file accounts for: its records, records
	// of its runs that the error policy skipped, and offsets Kafka has no
	// record for (compaction, transaction markers) within its runs.
	Ranges  offsets.Ranges `json:"ranges"`
	Records int64          `json:"records"`
	Bytes   int64          `json:"bytes"`
	// CRC32C is the CRC-32C of the stored bytes (FormatCRC32C), so that
	// verify --deep sees an edit that keeps the size. Entries written
	// before it existed have none.
	CRC32C string `json:"crc32c,omitempty"`
}

// Entry is one ledger object: written create-only before its data file is
// published. Before is the partition's handled state with every earlier
// entry's file published; once File is published too, the state is
// Before.With(File.Ranges). So the last entry alone, with one existence
// check of its file, tells where a partition stands.
type Entry struct {
	Version   int    `json:"version"`
	Cluster   string `json:"cluster_id"`
	Topic     string `json:"topic"`
	TopicID   string `json:"topic_id"`
	Partition int32  `json:"partition"`
	Seq       int64  `json:"seq"`
	Writer    string `json:"writer,omitempty"`
	// Deployment is what wrote the entry, beyond the process: resume
	// refuses a prefix that another deployment writes.
	Deployment
	Time   time.Time     `json:"time"`
	Before offsets.State `json:"before"`
	// File is the data file the entry publishes. Its Key is "" in an
	// entry that records only Gaps.
	File FileInfo `json:"file"`
	// Gaps are offsets the partition passed without storing them, with
	// why: handled, so never written again, but never in any file.
	Gaps []offsets.Gap `json:"gaps,omitempty"`
}

// Deployment is the configuration a ledger is written with: two
// deployments that share a prefix would fence each other off, or mix
// formats in one partition, so resume checks it. Entries written before
// it existed leave it empty, and are not checked.
type Deployment struct {
	Group    string `json:"group,omitempty"`    // kafka.group
	Format   string `json:"format,omitempty"`   // format.type, compression and file extension
	Template string `json:"template,omitempty"` // file.name_template
}

// Differs says which of d's format and template another deployment o has
// otherwise, as "key o's value, not d's", or "" when none does. An empty
// field of o (an entry of an older build) matches anything. The group is
// not compared here: a group may be renamed, or its commits lost, so
// resume asks whether the other group still has members.
func (d Deployment) Differs(o Deployment) string {
	var out []string
	for _, f := range []struct{ key, mine, theirs string }{
		{"format (type, compression, file.extension)", d.Format, o.Format},
		{"file.name_template", d.Template, o.Template},
	} {
		if f.theirs != "" && f.mine != "" && f.theirs != f.mine {
			out = append(out, fmt.Sprintf("%s %q, not %q", f.key, f.theirs, f.mine))
		}
	}
	return strings.Join(out, "; ")
}

// GapRanges are the offsets of every gap of the entry.
func (e *Entry) GapRanges() offsets.Ranges {
	var rs offsets.Ranges
	for _, g := range e.Gaps {
		rs = rs.Union(g.Ranges)
	}
	return rs
}

// HasFile reports whether the entry publishes a data file; an entry that
// records only gaps has none.
func (e *Entry) HasFile() bool { return e.File.Key != "" }

// Identity is the log the entry belongs to.
func (e *Entry) Identity() Identity {
	return Identity{Cluster: e.Cluster, Topic: e.Topic, TopicID: e.TopicID, Partition: e.Partition}
}

// After is the partition's state once the entry's file is published.
func (e *Entry) After() offsets.State { return e.Before.With(e.File.Ranges).With(e.GapRanges()) }

// version is the lowest entry format version that holds e.
func (e *Entry) version() int {
	if len(e.Gaps) > 0 || !e.HasFile() || e.Deployment != (Deployment{}) || e.File.CRC32C != "" {
		return 2
	}
	return 1
}

// check refuses an entry that can't have been written by this format.
func (e *Entry) check() error {
	switch {
	case e.Version < 1 || e.Version > EntryVersion:
		return fmt.Errorf("version %d; this build reads versions 1 to %d", e.Version, EntryVersion)
	case e.Seq < 0 || e.Before.Next < 0 || e.File.Records < 0 || e.File.Bytes < 0:
		return errors.New("a field is missing or negative")
	case !e.HasFile() && (len(e.Gaps) == 0 || len(e.File.Ranges) > 0 || e.File.Records > 0 || e.File.Bytes > 0):
		return errors.New("an entry without a file must record gaps, and nothing of a file")
	case e.Version < e.version():
		return fmt.Errorf("version %d can't hold gaps or an entry without a file", e.Version)
	}
	if e.File.CRC32C != "" && !validCRC32C(e.File.CRC32C) {
		return fmt.Errorf("file.crc32c %q is not 8 lowercase hex digits", e.File.CRC32C)
	}
	if err := e.Before.Above.Valid(); err != nil {
		return fmt.Errorf("before.above: %w", err)
	}
	if err := e.File.Ranges.Valid(); err != nil {
		return fmt.Errorf("file.ranges: %w", err)
	}
	for _, r := range e.File.Ranges {
		if r[0] < e.Before.Next || len(e.Before.Above.Overlap(offsets.Ranges{r})) > 0 {
			return fmt.Errorf("file.ranges [%d, %d) holds offsets handled before the file", r[0], r[1])
		}
	}
	var gaps offsets.Ranges
	for i, g := range e.Gaps {
		if err := g.Ranges.Valid(); err != nil || len(g.Ranges) == 0 {
			return fmt.Errorf("gaps[%d].ranges: empty or %v", i, err)
		}
		if g.Cause != offsets.GapRetention && g.Cause != offsets.GapOperator {
			return fmt.Errorf("gaps[%d]: unknown cause %q", i, g.Cause)
		}
		for _, r := range g.Ranges {
			if r[0] < e.Before.Next || len(e.Before.Above.Overlap(offsets.Ranges{r})) > 0 || len(e.File.Ranges.Overlap(offsets.Ranges{r})) > 0 || len(gaps.Overlap(offsets.Ranges{r})) > 0 {
				return fmt.Errorf("gaps[%d] [%d, %d) holds offsets handled before or by the file", i, r[0], r[1])
			}
		}
		gaps = gaps.Union(g.Ranges)
	}
	return nil
}

// Ledger reads and writes the resume ledger under a storage prefix.
type Ledger struct {
	st     Store
	prefix string // storage.prefix
}

// New returns the ledger under prefix.
func New(st Store, prefix string) *Ledger { return &Ledger{st: st, prefix: prefix} }

// TopicDir is the directory of topic's ledgers, one for each topic id it
// had.
func (l *Ledger) TopicDir(topic string) string {
	return l.prefix + StateDir + "ledger/" + topic + "/"
}

func (l *Ledger) partitionDir(id Identity) string {
	return l.TopicDir(id.Topic) + id.TopicID + "/" + strconv.Itoa(int(id.Partition)) + "/"
}

// EntrySeq reads the sequence number out of an entry's key (EntryKey's
// inverse); ok is false for a key that is not an entry of id's.
func (l *Ledger) EntrySeq(id Identity, key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, l.partitionDir(id))
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".json")
	if !ok {
		return 0, false
	}
	digits := strings.ReplaceAll(rest, "/", "")
	if len(digits) != seqDigits || len(rest) != seqDigits+seqDigits/seqLevel-1 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && l.EntryKey(id, n) == key
}

// EntryKey is the key of entry seq of a partition.
func (l *Ledger) EntryKey(id Identity, seq int64) string {
	d := fmt.Sprintf("%0*d", seqDigits, seq)
	var b strings.Builder
	b.WriteString(l.partitionDir(id))
	for i := 0; i < seqDigits; i += seqLevel {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(d[i : i+seqLevel])
	}
	b.WriteString(".json")
	return b.String()
}

// EntryDirs returns the directories of a partition's entries seq-1 and
// seq: where a writer killed while writing its next entry left what it
// was writing, for the partition's new owner to clean up.
func (l *Ledger) EntryDirs(id Identity, seq int64) []string {
	var dirs []string
	for _, s := range []int64{seq - 1, seq} {
		if s < 0 {
			continue
		}
		k := l.EntryKey(id, s)
		d := k[:strings.LastIndexByte(k, '/')+1]
		if len(dirs) == 0 || dirs[len(dirs)-1] != d {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Append writes e create-only. storage.ErrExists means another writer
// wrote that sequence number first: it owns the partition now.
func (l *Ledger) Append(ctx context.Context, e *Entry) error {
	if e.Version == 0 {
		e.Version = e.version()
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode ledger entry %d of %s/%d: %w", e.Seq, e.Topic, e.Partition, err)
	}
	return l.st.Put(ctx, l.EntryKey(e.Identity(), e.Seq), data, nil)
}

// TopicIDs lists the topic ids that have a ledger for topic.
func (l *Ledger) TopicIDs(ctx context.Context, topic string) ([]string, error) {
	var ids []string
	dir := l.TopicDir(topic)
	err := l.st.ListDir(ctx, dir, func(o storage.Object) error {
		if o.Dir {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(o.Key, dir), "/"))
		}
		return nil
	})
	return ids, err
}

// Last returns the partition's last entry, or nil when it has none. It
// lists one directory level at a time, taking the highest name, and steps
// back only past levels left empty by a write that failed.
func (l *Ledger) Last(ctx context.Context, id Identity) (*Entry, error) {
	key, err := l.lastKey(ctx, l.partitionDir(id), 0)
	if err != nil || key == "" {
		return nil, err
	}
	return l.Read(ctx, id, key)
}

func (l *Ledger) lastKey(ctx context.Context, dir string, depth int) (string, error) {
	last := depth == seqDigits/seqLevel-1
	var names []string
	err := l.st.ListDir(ctx, dir, func(o storage.Object) error {
		name := strings.TrimPrefix(o.Key, dir)
		if last && !o.Dir && isSeqName(strings.TrimSuffix(name, ".json")) && strings.HasSuffix(name, ".json") ||
			!last && o.Dir && isSeqName(strings.TrimSuffix(name, "/")) {
			names = append(names, o.Key)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for i := len(names) - 1; i >= 0; i-- {
		if last {
			return names[i], nil
		}
		k, err := l.lastKey(ctx, names[i], depth+1)
		if err != nil || k != "" {
			return k, err
		}
	}
	return "", nil
}

func isSeqName(s string) bool {
	if len(s) != seqLevel {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Read reads and checks the entry under key, which must belong to id.
func (l *Ledger) Read(ctx context.Context, id Identity, key string) (*Entry, error) {
	rc, err := l.st.Read(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// An entry is small; a huge object here is not one of ours.
	data, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read ledger entry %s: %w", key, err)
	}
	var e Entry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, &CorruptError{Key: key, Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &CorruptError{Key: key, Err: errors.New("data after the entry")}
	}
	if err := e.check(); err != nil {
		return nil, &CorruptError{Key: key, Err: err}
	}
	if e.Topic != id.Topic || e.Partition != id.Partition || e.TopicID != id.TopicID || l.EntryKey(id, e.Seq) != key {
		return nil, &CorruptError{Key: key, Err: fmt.Errorf("it names %s/%d (topic id %s) seq %d, not what its key says", e.Topic, e.Partition, e.TopicID, e.Seq)}
	}
	return &e, nil
}

// Entries calls fn for each entry of a partition, in sequence order. It
// reads them all: for verify, not for resume.
func (l *Ledger) Entries(ctx context.Context, id Identity, fn func(key string, e *Entry, err error) error) error {
	var keys []string
	err := l.st.List(ctx, l.partitionDir(id), func(o storage.Object) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, err := l.Read(ctx, id, k)
		var ce *CorruptError
		if err != nil && !errors.As(err, &ce) {
			return err
		}
		if err := fn(k, e, err); err != nil {
			return err
		}
	}
	return nil
}

// CorruptError is a ledger object that can't be read as an entry of its
// partition.
type CorruptError struct {
	Key string
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("ledger entry %s is not valid: %v (Spillway writes these objects create-only and never changes them: if Spillway did not write it, as when it was copied in or left by another tool, delete it; if it was an entry of Spillway's, restore it from a backup, or write into a new storage.prefix)", e.Key, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }
