// Package verify reads back what storage holds and checks it: per
// partition, every offset stored exactly once, with no gaps up to a given
// end. The demo uses it for its summary, and `spillway verify` will compare
// it with the group's committed offsets.
package verify

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/storage"
)

// Partition is what storage holds for one partition.
type Partition struct {
	Topic      string
	Partition  int32
	Files      int
	Records    int64
	Duplicates int64   // offsets stored more than once
	offsets    []int64 // sorted after Scan
}

// Gaps lists missing offset ranges [from, to) below end. Offsets absent from
// Kafka itself (compaction, transaction markers) also show as gaps, so callers
// compare against topics without them or accept gaps Kafka explains.
func (p *Partition) Gaps(start, end int64) [][2]int64 {
	var gaps [][2]int64
	next := start
	for _, o := range p.offsets {
		if o < next {
			continue
		}
		if o > next {
			gaps = append(gaps, [2]int64{next, o})
		}
		next = o + 1
	}
	if next < end {
		gaps = append(gaps, [2]int64{next, end})
	}
	return gaps
}

// Max is the highest stored offset, or -1.
func (p *Partition) Max() int64 {
	if len(p.offsets) == 0 {
		return -1
	}
	return p.offsets[len(p.offsets)-1]
}

// Scan reads every object under prefix whose name the template matches and
// collects the offsets of its records. Only the jsonl and json formats can
// be read back today.
func Scan(ctx context.Context, b *storage.Bucket, tmpl *naming.Template, prefix string) (map[string]map[int32]*Partition, error) {
	out := map[string]map[int32]*Partition{}
	var keys []string
	err := b.List(ctx, prefix, func(o storage.Object) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	for _, key := range keys {
		name, exts := splitExt(strings.TrimPrefix(key, prefix))
		v, ok := tmpl.Match(name)
		if !ok {
			continue
		}
		if out[v.Topic] == nil {
			out[v.Topic] = map[int32]*Partition{}
		}
		p := out[v.Topic][v.Partition]
		if p == nil {
			p = &Partition{Topic: v.Topic, Partition: v.Partition}
			out[v.Topic][v.Partition] = p
		}
		p.Files++
		if err := readOffsets(ctx, b, key, exts, p); err != nil {
			return nil, err
		}
	}
	for _, ps := range out {
		for _, p := range ps {
			sort.Slice(p.offsets, func(i, j int) bool { return p.offsets[i] < p.offsets[j] })
			for i := 1; i < len(p.offsets); i++ {
				if p.offsets[i] == p.offsets[i-1] {
					p.Duplicates++
				}
			}
		}
	}
	return out, nil
}

// TrimExt removes the known format and compression extensions of a name.
func TrimExt(name string) string {
	n, _ := splitExt(name)
	return n
}

// splitExt separates "t-0-5.jsonl.zst" into "t-0-5" and [jsonl zst].
// Extensions are the known format and compression names only, so a name
// template holding dots keeps them.
func splitExt(name string) (string, []string) {
	known := map[string]bool{"jsonl": true, "json": true, "csv": true, "bin": true, "avro": true, "parquet": true,
		"gz": true, "zst": true, "snappy": true}
	var exts []string
	for {
		i := strings.LastIndexByte(name, '.')
		if i < 0 || !known[name[i+1:]] {
			return name, exts
		}
		exts = append([]string{name[i+1:]}, exts...)
		name = name[:i]
	}
}

func readOffsets(ctx context.Context, b *storage.Bucket, key string, exts []string, p *Partition) error {
	rc, err := b.Read(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	var r io.Reader = rc
	for i := len(exts) - 1; i >= 0; i-- {
		switch exts[i] {
		case "gz":
			zr, err := gzip.NewReader(r)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			r = zr
		case "zst":
			zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			defer zr.Close()
			r = zr
		case "snappy":
			r = snappy.NewReader(r)
		case "jsonl", "json":
		default:
			return fmt.Errorf("%s: reading .%s files back is not supported yet", key, exts[i])
		}
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 256<<10))
	var rec struct {
		Offset *int64 `json:"offset"`
	}
	// A json-array file starts with '['; tokens let one loop read both.
	if len(exts) > 0 && exts[0] == "json" {
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	for dec.More() {
		rec.Offset = nil
		if err := dec.Decode(&rec); err != nil {
			return fmt.Errorf("%s: record %d: %w", key, p.Records, err)
		}
		if rec.Offset == nil {
			return fmt.Errorf("%s: record %d has no offset field; verification needs format.fields to include offset", key, p.Records)
		}
		p.offsets = append(p.offsets, *rec.Offset)
		p.Records++
	}
	return nil
}

// ErrNotListable means the name template does not put a partition's files
// under one listable prefix, so what storage holds for it can't be found.
var ErrNotListable = errors.New("file.name_template has a variable before {{start_offset}} other than {{topic}} and {{partition}}, so one partition's files can't be listed")

// NextOffset returns one past the highest offset stored for a partition,
// and ok=false when storage holds nothing for it. It also removes what a
// writer that died left for the partition: call it only as its owner. It lists the partition's
// prefix, picks the file with the highest start offset, and reads that file
// alone.
func NextOffset(ctx context.Context, b *storage.Bucket, tmpl *naming.Template, prefix, topic string, partition int32) (next int64, ok bool, err error) {
	pp, exact := tmpl.PartitionPrefix(topic, partition)
	if !exact {
		return 0, false, ErrNotListable
	}
	// A previous owner that died mid-write left temp files: they hold no
	// committed data, and this process owns the partition now.
	err = b.RemoveAbandoned(ctx, prefix+pp, func(key string) bool {
		name, _ := splitExt(strings.TrimPrefix(key, prefix))
		_, ok := tmpl.MatchPartition(name, topic, partition)
		return ok
	})
	if err != nil {
		return 0, false, err
	}
	lastKey, lastStart, lastExts := "", int64(-1), []string(nil)
	err = b.List(ctx, prefix+pp, func(o storage.Object) error {
		name, exts := splitExt(strings.TrimPrefix(o.Key, prefix))
		if start, ok := tmpl.MatchPartition(name, topic, partition); ok && start > lastStart {
			lastKey, lastStart, lastExts = o.Key, start, exts
		}
		return nil
	})
	if err != nil || lastKey == "" {
		return 0, false, err
	}
	p := &Partition{Topic: topic, Partition: partition}
	if err := readOffsets(ctx, b, lastKey, lastExts, p); err != nil {
		return 0, false, err
	}
	if len(p.offsets) == 0 {
		return lastStart, true, nil
	}
	return slices.Max(p.offsets) + 1, true, nil
}
