package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/runner"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/storage"
)

func skipCmd(stdout io.Writer, environ []string) *cobra.Command {
	var path, topic, reason string
	var partition int32
	var to int64
	c := &cobra.Command{
		Use:   "skip --config FILE --topic T --partition P --to OFFSET --reason TEXT",
		Short: "Skip a partition's records on purpose, recorded in the ledger (every instance of the group stopped)",
		Long: `skip records in the ledger that the records of one partition from where
storage stands up to --to (exclusive) are skipped on purpose, with --reason,
and moves the group's offset there. Spillway resumes from the ledger, not
from the group's commit, so this is the way to skip: moving the group's
offset alone makes Spillway read the records again. verify lists the skip
with its reason. Stop every instance of the group first: skip refuses a
group with members.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case path == "":
				return usageError{errors.New("skip needs --config FILE")}
			case topic == "" || partition < 0 || to < 0:
				return usageError{errors.New("skip needs --topic, --partition and --to")}
			case reason == "":
				return usageError{errors.New("skip needs --reason: the ledger keeps why records were skipped, for whoever reads it later")}
			}
			cfg, err := loadConfig(path, environ)
			if err != nil {
				return err
			}
			e, err := runSkip(cmd.Context(), cfg, topic, partition, to, reason)
			if err != nil {
				return err
			}
			g := e.Gaps[0]
			_, err = fmt.Fprintf(stdout, "%s/%d: skipped %s (%d offsets), ledger entry %d; the group's offset is %d\n",
				topic, partition, offsets.FormatRanges(g.Ranges), g.Ranges.Count(), e.Seq, e.After().Next)
			return err
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "", "config file (YAML)")
	c.Flags().StringVar(&topic, "topic", "", "the topic")
	c.Flags().Int32Var(&partition, "partition", -1, "the partition")
	c.Flags().Int64Var(&to, "to", -1, "skip up to this offset (exclusive)")
	c.Flags().StringVar(&reason, "reason", "", "why, kept in the ledger")
	return c
}

func runSkip(ctx context.Context, cfg *config.Config, topic string, partition int32, to int64, reason string) (*ledger.Entry, error) {
	names, err := cfg.Names()
	if err != nil {
		return nil, usageError{err}
	}
	if names.Template.LatestPerKey() {
		return nil, usageError{errors.New("file.name_template keeps one object per key and no ledger: move the group's offset with kafka-consumer-groups --reset-offsets instead")}
	}
	opts, err := source.ClientOptions(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups, err := adm.DescribeGroups(ctx, cfg.Kafka.Group)
	if err == nil {
		err = groups.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", cfg.Kafka.Group, err)
	}
	if g := groups[cfg.Kafka.Group]; len(g.Members) > 0 {
		return nil, fmt.Errorf("group %s has %d members (state %s): stop every instance of it first, since a running one owns the partition's ledger", cfg.Kafka.Group, len(g.Members), g.State)
	}
	meta, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("read topic %s: %w", topic, err)
	}
	td, ok := meta.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	if _, ok := td.Partitions[partition]; !ok {
		return nil, fmt.Errorf("topic %s has no partition %d", topic, partition)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("read the log start of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("read the log end of %s: %w", topic, err)
	}
	st, _ := starts.Lookup(topic, partition)
	en, _ := ends.Lookup(topic, partition)

	b, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{Retry: storage.Retry{MaxAttempts: cfg.Storage.MaxRetries + 1}})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	id := ledger.Identity{Cluster: meta.Cluster, Topic: topic, TopicID: base64.RawURLEncoding.EncodeToString(td.ID[:]), Partition: partition}
	host, _ := os.Hostname()
	ro := ledger.ResumeOptions{Deployment: runner.Deployment(cfg, names.Ext)}
	e, err := ledger.New(b, cfg.Storage.Prefix).Skip(ctx, id, ledger.Log{Start: st.Offset, End: en.Offset}, ro, to, reason, fmt.Sprintf("spillway skip on %s", host))
	if err != nil {
		return nil, err
	}
	offs := kadm.Offsets{}
	offs.AddOffset(topic, partition, e.After().Next, -1)
	resp, err := adm.CommitOffsets(ctx, cfg.Kafka.Group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the ledger records the skip (entry %d), but moving the group's offset failed (Spillway resumes from the ledger anyway): %w", e.Seq, err)
	}
	return e, nil
}
