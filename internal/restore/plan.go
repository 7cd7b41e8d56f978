package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

// UsageError is a restore that can't start as asked: a selection that
// names nothing, a DST that is missing or too small. The command exits 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usagef(format string, a ...any) error { return &UsageError{Err: fmt.Errorf(format, a...)} }

// Selection narrows what is restored. Offsets are source offsets, times
// record timestamps; both are half-open: [From, To).
type Selection struct {
	Partitions []int32 // nil: all
	FromOffset int64
	ToOffset   int64 // 0: no bound
	FromTime   int64 // Unix milliseconds; 0: no bound
	ToTime     int64 // Unix milliseconds; 0: no bound
}

func (s Selection) partition(p int32) bool {
	return s.Partitions == nil || slices.Contains(s.Partitions, p)
}

// File is one data file of a partition, as its ledger entry says.
type File struct {
	Key     string
	Ranges  offsets.Ranges
	Records int64
	Bytes   int64
}

// Partition is what storage holds of one source partition, in offset
// order, and the topic it goes to.
type Partition struct {
	Topic     string
	TopicID   string
	Partition int32
	To        string // DST topic
	Files     []File
}

// Ranges are the offsets the partition's files account for within sel's
// offsets.
func (p *Partition) Ranges(sel Selection) offsets.Ranges {
	var rs offsets.Ranges
	for _, f := range p.Files {
		rs = rs.Union(f.Ranges)
	}
	return clip(rs, sel)
}

func clip(rs offsets.Ranges, sel Selection) offsets.Ranges {
	hi := int64(1<<63 - 1)
	if sel.ToOffset > 0 {
		hi = sel.ToOffset
	}
	return rs.Overlap(offsets.Ranges{{sel.FromOffset, hi}})
}

// Plan lists, from the ledger under prefix, the files of each selected
// partition of each topic in topics (source → DST), in offset order. A
// topic whose ledger holds several topic ids (it was deleted and
// recreated) is refused: which one to restore is the operator's choice.
// Files whose offsets interleave (a name template that splits a partition
// into several open files) are merged when read.
func Plan(ctx context.Context, st ledger.Store, prefix string, topics map[string]string, sel Selection) ([]Partition, error) {
	led := ledger.New(st, prefix)
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	var out []Partition
	for _, topic := range names {
		ids, err := led.TopicIDs(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("list the ledger of %s: %w", topic, err)
		}
		switch {
		case len(ids) == 0:
			return nil, usagef("storage holds no ledger for topic %s under %s (nothing of it was stored, or storage.prefix is not where it was written)", topic, led.TopicDir(topic))
		case len(ids) > 1:
			return nil, usagef("the ledger of topic %s holds %d topic ids (%s): the topic was deleted and recreated; restore can't tell which one to restore", topic, len(ids), strings.Join(ids, ", "))
		}
		parts, err := partitionsOf(ctx, st, led.TopicDir(topic)+ids[0]+"/")
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if !sel.partition(p) {
				continue
			}
			part := Partition{Topic: topic, TopicID: ids[0], Partition: p, To: topics[topic]}
			id := ledger.Identity{Topic: topic, TopicID: ids[0], Partition: p}
			err := led.Entries(ctx, id, func(key string, e *ledger.Entry, err error) error {
				if err != nil {
					return err
				}
				if e.HasFile() {
					part.Files = append(part.Files, File{Key: e.File.Key, Ranges: e.File.Ranges, Records: e.File.Records, Bytes: e.File.Bytes})
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("read the ledger of %s/%d: %w", topic, p, err)
			}
			if err := order(&part); err != nil {
				return nil, err
			}
			out = append(out, part)
		}
	}
	for _, p := range sel.Partitions {
		if !slices.ContainsFunc(out, func(x Partition) bool { return x.Partition == p }) {
			return nil, usagef("--partitions %d: storage holds no ledger for partition %d of %s", p, p, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// order sorts the partition's files by their first offset.
func order(p *Partition) error {
	p.Files = slices.DeleteFunc(p.Files, func(f File) bool { return len(f.Ranges) == 0 })
	sort.Slice(p.Files, func(i, j int) bool { return p.Files[i].Ranges[0][0] < p.Files[j].Ranges[0][0] })
	return nil
}

// partitionsOf lists the partition numbers under a topic id's ledger.
func partitionsOf(ctx context.Context, st ledger.Store, dir string) ([]int32, error) {
	var ps []int32
	err := st.ListDir(ctx, dir, func(o storage.Object) error {
		if !o.Dir {
			return nil
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(o.Key, dir), "/"), 10, 32)
		if err == nil {
			ps = append(ps, int32(n))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	slices.Sort(ps)
	return ps, nil
}

// LedgerTopics lists the topics that have a ledger under prefix, for a
// config that names its topics by a pattern.
func LedgerTopics(ctx context.Context, st ledger.Store, prefix string) ([]string, error) {
	dir := prefix + ledger.StateDir + "ledger/"
	var out []string
	err := st.ListDir(ctx, dir, func(o storage.Object) error {
		if o.Dir {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(o.Key, dir), "/"))
		}
		return nil
	})
	return out, err
}

// WriteDryRun prints what a restore of plan would do, one partition a
// line.
func WriteDryRun(w io.Writer, plan []Partition, sel Selection) error {
	var files, recs, bytes int64
	for _, p := range plan {
		var pr, pb int64
		var n int
		for _, f := range p.Files {
			if len(clip(f.Ranges, sel)) == 0 {
				continue
			}
			n++
			pr += f.Records
			pb += f.Bytes
		}
		rs := p.Ranges(sel)
		if _, err := fmt.Fprintf(w, "%s/%d -> %s/%d: %d files, offsets %s, %d records, %d bytes stored\n", p.Topic, p.Partition, p.To, p.Partition, n, fmtRanges(rs), pr, pb); err != nil {
			return err
		}
		files, recs, bytes = files+int64(n), recs+pr, bytes+pb
	}
	note := ""
	if sel.FromOffset > 0 || sel.ToOffset > 0 || sel.FromTime > 0 || sel.ToTime > 0 {
		note = " (records and bytes are those of the files that hold selected offsets; the offset and time bounds are applied while reading)"
	}
	_, err := fmt.Fprintf(w, "total: %d partitions, %d files, %d records, %d bytes%s; dry run: nothing produced\n", len(plan), files, recs, bytes, note)
	return err
}

func fmtRanges(rs offsets.Ranges) string {
	if len(rs) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%d,%d)", r[0], r[1])
	}
	return b.String()
}

var errStop = errors.New("restore: past the selection")
