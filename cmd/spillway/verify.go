package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/audit"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/tables"
	"github.com/spillway/spillway/internal/verify"
)

// errInconsistent makes verify exit 1 after printing its report.
var errInconsistent = errors.New("storage is not consistent with Kafka")

func verifyCmd(stdout io.Writer, environ []string) *cobra.Command {
	var path string
	var asJSON, deep, rmOrphans, dryRun bool
	olderThan := defaultOrphanAge
	c := &cobra.Command{
		Use:   "verify --config FILE",
		Short: "Check storage against Kafka from the ledger: gaps, duplicates, commits past the data or the log end, missing or changed files, unknown files",
		Long: `verify reads the resume ledger under storage.prefix and checks, for every
partition of the configured topics: that every offset from where the ledger
begins up to the group's commit is in exactly one published file (or was
skipped by the error policy), that the commit passes neither the log end
nor what the ledger says is stored, that every file the ledger names is
there with its recorded size, and that nothing else lies under the prefix.
With --deep it also reads every published file back (jsonl, json, csv, avro and
parquet).
It writes and deletes nothing, and exits 1 on any problem.

With --remove-orphans (and iceberg.table), it then deletes the orphans it
lists: data files under a table's data/ folder that no ledger entry names
and no snapshot (current or older) references, last modified more than
--older-than ago (default 72h, as Iceberg's remove_orphan_files), so that
a file being uploaded, or not yet in the ledger, is kept. It removes
nothing when verify finds a problem. --dry-run prints what it would remove.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return usageError{errors.New("verify needs --config FILE")}
			}
			if (dryRun || cmd.Flags().Changed("older-than")) && !rmOrphans {
				return usageError{errors.New("--dry-run and --older-than go with --remove-orphans")}
			}
			if rmOrphans && asJSON {
				return usageError{errors.New("--remove-orphans prints text; leave out --json")}
			}
			if olderThan < 0 {
				return usageError{fmt.Errorf("--older-than %s: give a duration of 0 or more, such as 72h", olderThan)}
			}
			cfg, err := loadConfig(path, environ)
			if err != nil {
				return err
			}
			if rmOrphans && !cfg.Iceberg.Enabled() {
				return usageError{errors.New("--remove-orphans removes a table's orphaned data files, and iceberg.table is not set: set it, or leave out --remove-orphans")}
			}
			rep, err := runVerify(cmd.Context(), cfg, deep)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteText(stdout)
			}
			if err != nil {
				return err
			}
			if rmOrphans {
				if err := removeOrphans(cmd.Context(), stdout, cfg, rep, orphanRemoval{olderThan: olderThan, dryRun: dryRun, now: time.Now}); err != nil {
					return err
				}
			}
			if !rep.OK {
				return errInconsistent
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "", "config file (YAML)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	c.Flags().BoolVar(&deep, "deep", false, "also read every published file back and check its records")
	c.Flags().BoolVar(&rmOrphans, "remove-orphans", false, "then delete the tables' orphaned data files older than --older-than (none when verify finds a problem)")
	c.Flags().DurationVar(&olderThan, "older-than", defaultOrphanAge, "with --remove-orphans: remove only orphans last modified longer ago than this")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "with --remove-orphans: print what would be removed, remove nothing")
	return c
}

func runVerify(ctx context.Context, cfg *config.Config, deep bool) (verify.Report, error) {
	names, err := cfg.Names()
	if err != nil {
		return verify.Report{}, usageError{err}
	}
	b, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{Retry: storage.Retry{MaxAttempts: cfg.Storage.MaxRetries + 1}})
	if err != nil {
		return verify.Report{}, err
	}
	defer b.Close()

	opts, err := source.ClientOptions(cfg.Kafka)
	if err != nil {
		return verify.Report{}, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return verify.Report{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics := cfg.Kafka.Topics
	re, err := cfg.Kafka.TopicPattern()
	if err != nil {
		return verify.Report{}, err
	}
	if re != nil {
		all, err := adm.ListTopics(ctx)
		if err != nil {
			return verify.Report{}, fmt.Errorf("list topics: %w", err)
		}
		topics = nil
		for _, t := range all.Names() {
			if re.MatchString(t) {
				topics = append(topics, t)
			}
		}
	}
	vo := verify.Options{Names: names, Foreign: cfg.Storage.EarlierFiles == "foreign", ReadsBack: cfg.Storage.EarlierFiles == "spillway", NotData: cfg.IcebergNotData()}
	if deep {
		vo.Deep = &audit.DeepOptions{OffsetField: cfg.Format.Envelope && slices.Contains(cfg.Format.Fields, "offset"), CSVFields: cfg.Format.Fields}
	}
	if _, missing := cfg.Iceberg.MissingSQLite(cfg.IcebergWarehouse()); missing && cfg.Iceberg.Enabled() {
		// Opening the catalog would create it: verify only reads, and no
		// catalog means no table yet.
		vo.Table = noTable(cfg)
	} else if cfg.Iceberg.Enabled() {
		cat, err := iceberg.Open(ctx, cfg.Iceberg, cfg.IcebergWarehouse())
		if err != nil {
			return verify.Report{}, fmt.Errorf("iceberg: %w", err)
		}
		defer cat.Close()
		vo.Table = tableReader(cat, cfg)
	}
	return verify.Run(ctx, b, adm, cfg.Kafka.Group, topics, vo)
}

// noTable reads every topic's table as not created yet.
func noTable(cfg *config.Config) func(context.Context, string) (*verify.Table, error) {
	return func(_ context.Context, topic string) (*verify.Table, error) {
		return &verify.Table{Name: tables.TableName(cfg.Iceberg.Table, topic)}, nil
	}
}

// tableReader reads a topic's table for verify, its locations made keys
// under storage.url as the ledger names files.
func tableReader(cat *iceberg.Catalog, cfg *config.Config) func(context.Context, string) (*verify.Table, error) {
	base := tables.OptionsFor(cfg).Base
	key := func(loc string) string {
		if k, ok := strings.CutPrefix(loc, base); ok {
			return k
		}
		return loc
	}
	return func(ctx context.Context, topic string) (*verify.Table, error) {
		name := tables.TableName(cfg.Iceberg.Table, topic)
		tb, err := cat.Table(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("iceberg: table %s: %w", name, err)
		}
		cur, err := tb.Current(ctx, topic)
		if err != nil {
			return nil, err
		}
		vt := &verify.Table{Name: name, Exists: cur.Exists, DataPrefix: key(strings.TrimSuffix(cur.Location, "/")) + "/data/", Ends: cur.Ends, Seqs: cur.Seqs, TopicIDs: cur.TopicIDs}
		for _, f := range cur.Files {
			vt.Files = append(vt.Files, key(f))
		}
		for _, f := range cur.Referenced {
			vt.Referenced = append(vt.Referenced, key(f))
		}
		return vt, nil
	}
}
