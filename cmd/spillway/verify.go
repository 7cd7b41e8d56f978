package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/verify"
)

// errInconsistent makes verify exit 1 after printing its report.
var errInconsistent = errors.New("storage is not consistent with Kafka")

func verifyCmd(stdout io.Writer, environ []string) *cobra.Command {
	var path string
	var asJSON bool
	c := &cobra.Command{
		Use:   "verify --config FILE",
		Short: "Check storage against Kafka per partition: gaps, duplicates, committed vs stored",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return usageError{errors.New("verify needs --config FILE")}
			}
			cfg, err := loadConfig(path, environ)
			if err != nil {
				return err
			}
			rep, err := runVerify(cmd.Context(), cfg)
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
			if !rep.OK {
				return errInconsistent
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "", "config file (YAML)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

func runVerify(ctx context.Context, cfg *config.Config) (verify.Report, error) {
	tmpl, err := naming.Parse(cfg.File.NameTemplate)
	if err != nil {
		return verify.Report{}, usageError{err} // it names the template
	}
	b, err := storage.Open(ctx, cfg.Storage.URL, storage.Options{Retry: storage.Retry{MaxAttempts: cfg.Storage.MaxRetries + 1}})
	if err != nil {
		return verify.Report{}, err
	}
	defer b.Close()
	stored, err := verify.Scan(ctx, b, tmpl, cfg.Storage.Prefix)
	if err != nil {
		return verify.Report{}, err
	}

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
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return verify.Report{}, fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return verify.Report{}, fmt.Errorf("list start offsets: %w", err)
	}
	committed, err := adm.FetchOffsets(ctx, cfg.Kafka.Group)
	if err != nil {
		return verify.Report{}, fmt.Errorf("fetch committed offsets of group %s: %w", cfg.Kafka.Group, err)
	}
	end, start, comm := verify.Offsets{}, verify.Offsets{}, verify.Offsets{}
	put := func(o verify.Offsets, t string, p int32, v int64) {
		if o[t] == nil {
			o[t] = map[int32]int64{}
		}
		o[t][p] = v
	}
	ends.Each(func(l kadm.ListedOffset) {
		if l.Err == nil {
			put(end, l.Topic, l.Partition, l.Offset)
		}
	})
	starts.Each(func(l kadm.ListedOffset) {
		if l.Err == nil {
			put(start, l.Topic, l.Partition, l.Offset)
		}
	})
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil {
			put(comm, o.Topic, o.Partition, o.At)
		}
	})
	return verify.Compare(stored, start, comm, end), nil
}
