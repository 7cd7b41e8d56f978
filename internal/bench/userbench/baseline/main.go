// Command baseline is userbench's baselines: a franz-go group consumer that
// reads a topic to the log end and discards it (raw), or writes each
// partition's values one per line to files of a given record count with one
// fsync per file (naive, optionally through zstd), then commits.
//
// It is a program of its own, not userbench run again, so that it links
// what a naive writer would and nothing of Spillway's but the zstd settings
// (internal/format): userbench links the runner, and with it iceberg-go,
// whose table/substrait package spends about 0.1 s and 32 MB at start
// (loading substrait's function set) in every process that links it. The
// baselines paid that too, which flattered Spillway by as much.
//
// userbench builds and runs it; it is not meant to be run by hand.
package main

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format"
)

// fetchSizes are the consumer's fetch settings; max 0 for franz-go's
// defaults.
type fetchSizes struct {
	max, partitionMax int32
	fetches           int
}

func main() {
	mode := flag.String("mode", "", "raw or naive")
	brokers := flag.String("brokers", "", "the broker")
	topic := flag.String("topic", "", "the topic")
	group := flag.String("group", "", "the consumer group")
	dir := flag.String("dir", "", "naive: where the files go")
	perFile := flag.Int64("per-file", 0, "naive: records per file")
	useZstd := flag.Bool("zstd", false, "naive: compress with zstd")
	sameZstd := flag.Bool("zstd-as-spillway", false, "naive -zstd: Spillway's zstd settings (internal/format.NewCompressor), not klauspost's defaults")
	fetchMax := flag.Int("fetch-max", 0, "the fetch size in bytes; 0 for franz-go's defaults")
	fetchPartitionMax := flag.Int("fetch-partition-max", 0, "with -fetch-max: the per-partition fetch size in bytes")
	fetches := flag.Int("fetches", 0, "with -fetch-max: fetches in flight")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fetch := fetchSizes{max: int32(*fetchMax), partitionMax: int32(*fetchPartitionMax), fetches: *fetches}
	if err := runChild(ctx, *mode, *brokers, *topic, *group, *dir, *perFile, *useZstd, *sameZstd, fetch); err != nil {
		fmt.Fprintf(os.Stderr, "baseline -mode %s: %v\n", *mode, err)
		os.Exit(1)
	}
}

// runChild is a baseline: it consumes topic in group from the start to the
// end offsets listed when it starts, writes (naive) or discards (raw), and
// commits what it read once every file is synced.
func runChild(ctx context.Context, mode, brokers, topic, group, dir string, perFile int64, useZstd, sameZstd bool, fetch fetchSizes) error {
	if mode != "raw" && mode != "naive" {
		return fmt.Errorf("unknown mode %q; want raw or naive", mode)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	}
	if fetch.max > 0 {
		opts = append(opts, kgo.FetchMaxBytes(fetch.max),
			kgo.FetchMaxPartitionBytes(fetch.partitionMax),
			kgo.MaxConcurrentFetches(fetch.fetches))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	l, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	end := map[int32]int64{}
	left := 0
	l.Each(func(o kadm.ListedOffset) {
		end[o.Partition] = o.Offset
		if o.Offset > 0 {
			left++
		}
	})

	start := time.Now()
	first := true
	files := map[int32]*naiveFile{}
	var writeErr error
	next := map[int32]int64{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err) })
		if ferr != nil {
			return ferr
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			if first {
				first = false
				fmt.Fprintf(os.Stderr, "first records after %s\n", time.Since(start).Round(time.Millisecond))
			}
			if mode == "naive" {
				for _, r := range p.Records {
					f := files[p.Partition]
					if f == nil {
						if f, err = openNaive(dir, topic, p.Partition, r.Offset, useZstd, sameZstd); err != nil {
							writeErr = cmp.Or(writeErr, err)
							return
						}
						files[p.Partition] = f
					}
					f.write(r.Value)
					if f.n++; f.n == perFile {
						writeErr = cmp.Or(writeErr, f.close())
						delete(files, p.Partition)
					}
				}
			}
			before := next[p.Partition]
			next[p.Partition] = p.Records[len(p.Records)-1].Offset + 1
			if e := end[p.Partition]; before < e && next[p.Partition] >= e {
				left--
			}
		})
		if writeErr != nil {
			return writeErr
		}
	}
	for _, f := range files {
		if err := f.close(); err != nil {
			return err
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	fmt.Fprintf(os.Stderr, "committed after %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// naiveFile is one output file: values one per line through a 1 MiB
// buffer, optionally zstd-compressed, fsynced once when complete.
type naiveFile struct {
	f   *os.File
	buf *bufio.Writer
	z   io.WriteCloser
	w   io.Writer
	n   int64
	err error
}

func openNaive(dir, topic string, p int32, offset int64, useZstd, sameZstd bool) (*naiveFile, error) {
	name := fmt.Sprintf("%s-%d-%d.jsonl", topic, p, offset)
	if useZstd {
		name += ".zst"
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	nf := &naiveFile{f: f, buf: bufio.NewWriterSize(f, 1<<20)}
	nf.w = nf.buf
	if useZstd {
		if sameZstd {
			nf.z, err = format.NewCompressor("zstd", nf.buf)
		} else {
			nf.z, err = zstd.NewWriter(nf.buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		nf.w = nf.z
	}
	return nf, nil
}

func (f *naiveFile) write(v []byte) {
	if f.err != nil {
		return
	}
	if _, err := f.w.Write(v); err != nil {
		f.err = err
		return
	}
	_, f.err = f.w.Write(newline)
}

func (f *naiveFile) close() error {
	err := f.err
	if f.z != nil {
		err = cmp.Or(err, f.z.Close())
	}
	err = cmp.Or(err, f.buf.Flush())
	err = cmp.Or(err, f.f.Sync())
	err = cmp.Or(err, f.f.Close())
	if err != nil {
		return fmt.Errorf("writing %s: %w", f.f.Name(), err)
	}
	return nil
}

// newline is written after each value; a literal at the call would be
// allocated per record through the io.Writer interface.
var newline = []byte{'\n'}
