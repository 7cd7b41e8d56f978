package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/restore"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/storage"
)

type restoreFlags struct {
	path, toTopic, group, offsetHeader string
	topicMap                           []string
	partitions                         []string
	fromOffset, toOffset               int64
	fromTime, toTime                   string
	dryRun                             bool
	txnBytes                           config.Size
	// afterRun, in tests, is called once the restore has ended and
	// before the admin endpoint stops, with its address ("" when off).
	afterRun func(adminAddr string)
}

func restoreCmd(stdout, stderr io.Writer, environ []string) *cobra.Command {
	var f restoreFlags
	c := &cobra.Command{
		Use:   "restore --config FILE --to-topic DST",
		Short: "Produce what storage holds back into Kafka, in offset order per partition, exactly once",
		Long: `restore reads the data files the ledger under storage.prefix lists for the
config's topics and produces each record, byte for byte (key, value, headers,
timestamp), to the same partition number of DST, in offset order. It runs in
Kafka transactions that commit the progress with the records, so that killed
and run again it goes on where it stopped and a read_committed consumer sees
every record once. DST must exist with enough partitions. See docs/restore.md.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.path == "" {
				return usageError{errors.New("restore needs --config FILE")}
			}
			cfg, err := loadConfig(f.path, environ)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			err = runRestore(ctx, cfg, f, stdout, stderr)
			var re *restore.RefusedError
			var ue *restore.UsageError
			if errors.As(err, &re) || errors.As(err, &ue) {
				return usageError{err}
			}
			return err
		},
	}
	fl := c.Flags()
	fl.StringVarP(&f.path, "config", "c", "", "config file (YAML) the files were written with")
	fl.StringVar(&f.toTopic, "to-topic", "", "destination topic (one configured topic)")
	fl.StringSliceVar(&f.topicMap, "topic-map", nil, "SRC=DST for each configured topic (several topics)")
	fl.StringSliceVar(&f.partitions, "partitions", nil, "source partitions to restore, e.g. 0,3 (default all)")
	fl.Int64Var(&f.fromOffset, "from-offset", 0, "first source offset to restore")
	fl.Int64Var(&f.toOffset, "to-offset", 0, "restore source offsets below this one (exclusive; 0: no bound)")
	fl.StringVar(&f.fromTime, "from-time", "", "restore records whose timestamp is at or after this RFC 3339 time")
	fl.StringVar(&f.toTime, "to-time", "", "restore records whose timestamp is before this RFC 3339 time")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would be restored, per partition, and produce nothing")
	fl.StringVar(&f.offsetHeader, "offset-header", "", "add each record's source offset as a header of this name (default none)")
	fl.StringVar(&f.group, "group", "", "progress group and transactional id (default spillway-restore-DST)")
	fl.Var(&sizeFlag{&f.txnBytes}, "txn-bytes", "bytes of records per transaction (default 16MiB)")
	return c
}

// sizeFlag reads a size such as 16MiB.
type sizeFlag struct{ s *config.Size }

func (f *sizeFlag) String() string {
	if f.s == nil {
		return ""
	}
	return strconv.FormatInt(int64(*f.s), 10)
}
func (f *sizeFlag) Set(v string) error { return f.s.UnmarshalText([]byte(v)) }
func (f *sizeFlag) Type() string       { return "size" }

func runRestore(ctx context.Context, cfg *config.Config, f restoreFlags, stdout, stderr io.Writer) error {
	if err := restore.Check(cfg); err != nil {
		return err
	}
	sel, err := f.selection()
	if err != nil {
		return usageError{err}
	}
	b, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{Retry: storage.Retry{MaxAttempts: cfg.Storage.MaxRetries + 1}})
	if err != nil {
		return err
	}
	defer b.Close()
	topics := cfg.Kafka.Topics
	re, err := cfg.Kafka.TopicPattern()
	if err != nil {
		return err
	}
	if re != nil {
		all, err := restore.LedgerTopics(ctx, b, cfg.Storage.Prefix)
		if err != nil {
			return fmt.Errorf("list the ledger's topics: %w", err)
		}
		topics = slices.DeleteFunc(all, func(t string) bool { return !re.MatchString(t) })
	}
	mapping, err := f.mapping(topics)
	if err != nil {
		return usageError{err}
	}
	plan, err := restore.Plan(ctx, b, cfg.Storage.Prefix, mapping, sel)
	if err != nil {
		return err
	}
	if f.dryRun {
		return restore.WriteDryRun(stdout, plan, sel)
	}
	names, err := cfg.Names()
	if err != nil {
		return usageError{err}
	}
	opts, err := source.ClientOptions(cfg.Kafka)
	if err != nil {
		return usageError{err}
	}
	// The process's memory: backpressure.memory_limit, as run reads it
	// (auto: the cgroup's limit), bounds the Go heap (GOMEMLIMIT) and sizes
	// the producer's buffer; a restore has no other budget to divide.
	mem, where, err := runner.MemoryPlan(cfg.Backpressure)
	if err != nil {
		return usageError{err}
	}
	debug.SetMemoryLimit(mem.GoLimit)
	fmt.Fprintf(stderr, "restore: memory limit %dMiB (%s), GOMEMLIMIT %dMiB, producer buffer %dMiB\n",
		mem.Process>>20, where, mem.GoLimit>>20, restore.BufferFor(mem.Process)>>20)
	live := &restore.Live{}
	addr, stopAdmin, err := serveRestoreAdmin(cfg, live, stderr)
	if err != nil {
		return err
	}
	defer stopAdmin()
	res, err := restore.Run(ctx, b, plan, restore.Options{
		Selection:    sel,
		Group:        f.group,
		OffsetHeader: f.offsetHeader,
		TxnBytes:     int64(f.txnBytes),
		BufferBytes:  restore.BufferFor(mem.Process),
		ContentExts:  names.ContentExts,
		Progress:     stderr,
		Live:         live,
	}, opts)
	if f.afterRun != nil {
		f.afterRun(addr)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "restored %d records (%d bytes) in %d transactions, %v; %d read and skipped (already restored or outside the selection)\n",
		res.Records, res.Bytes, res.Txns, res.Duration.Round(time.Millisecond), res.Skipped)
	return err
}

func (f restoreFlags) selection() (restore.Selection, error) {
	sel := restore.Selection{FromOffset: f.fromOffset, ToOffset: f.toOffset}
	if f.fromOffset < 0 || f.toOffset < 0 || f.toOffset > 0 && f.toOffset <= f.fromOffset {
		return sel, fmt.Errorf("--from-offset %d --to-offset %d selects nothing: offsets are >= 0 and --to-offset (exclusive) is above --from-offset", f.fromOffset, f.toOffset)
	}
	for _, s := range f.partitions {
		p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil || p < 0 {
			return sel, fmt.Errorf("--partitions %q: not a partition number", s)
		}
		sel.Partitions = append(sel.Partitions, int32(p))
	}
	for _, t := range []struct {
		flag, v string
		dst     *int64
	}{{"--from-time", f.fromTime, &sel.FromTime}, {"--to-time", f.toTime, &sel.ToTime}} {
		if t.v == "" {
			continue
		}
		tm, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			return sel, fmt.Errorf("%s %q: not an RFC 3339 time such as 2026-01-02T15:04:05Z", t.flag, t.v)
		}
		*t.dst = tm.UnixMilli()
	}
	if sel.ToTime != 0 && sel.ToTime <= sel.FromTime {
		return sel, fmt.Errorf("--to-time %s is not after --from-time %s", f.toTime, f.fromTime)
	}
	return sel, nil
}

// mapping is each configured topic's destination.
func (f restoreFlags) mapping(topics []string) (map[string]string, error) {
	if len(topics) == 0 {
		return nil, errors.New("the config names no topic that storage holds a ledger for (kafka.topics or kafka.topic_regex)")
	}
	switch {
	case f.toTopic != "" && len(f.topicMap) > 0:
		return nil, errors.New("restore takes --to-topic or --topic-map, not both")
	case f.toTopic != "":
		if len(topics) > 1 {
			return nil, fmt.Errorf("the config has %d topics (%s): --to-topic names one destination; give each its own with --topic-map SRC=DST", len(topics), strings.Join(topics, ", "))
		}
		return map[string]string{topics[0]: f.toTopic}, nil
	case len(f.topicMap) == 0:
		return nil, errors.New("restore needs --to-topic DST (or --topic-map SRC=DST,...)")
	}
	m := map[string]string{}
	used := map[string]string{}
	for _, kv := range f.topicMap {
		src, dst, ok := strings.Cut(kv, "=")
		switch {
		case !ok || src == "" || dst == "":
			return nil, fmt.Errorf("--topic-map %q: want SRC=DST", kv)
		case !slices.Contains(topics, src):
			sort.Strings(topics)
			return nil, fmt.Errorf("--topic-map %q: %s is not a configured topic with a ledger (%s)", kv, src, strings.Join(topics, ", "))
		case used[dst] != "":
			return nil, fmt.Errorf("--topic-map: %s and %s both go to %s; their partitions would mix", used[dst], src, dst)
		}
		m[src], used[dst] = dst, src
	}
	return m, nil
}
