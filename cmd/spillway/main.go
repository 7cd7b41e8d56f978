// Command spillway consumes Kafka topics and writes their records as files to
// object storage or a local directory, under a byte budget.
//
// This package is wiring only: flags, signals, logging and exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/connect/sinks"
	"github.com/spillway/spillway/internal/demo"
	"github.com/spillway/spillway/internal/runner"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// usageError marks errors that mean "fix your command line or config".
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Environ()))
}

func run(args []string, stdout, stderr io.Writer, environ []string) int {
	return runContext(context.Background(), args, stdout, stderr, environ)
}

// runContext is run with a context that, when cancelled, stops a command as
// SIGTERM does; tests use it to run `run` in-process.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	root := newRoot(stdout, stderr, environ)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "spillway:", err)
	var ue usageError
	var ce *config.Error
	if errors.As(err, &ue) || errors.As(err, &ce) {
		return exitUsage
	}
	return exitRuntime
}

// usageArgs marks argument errors as usage errors (exit 2).
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := v(c, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// groupCmd is a command that only holds subcommands: an unknown one is a
// usage error, not a request for help.
func groupCmd(c *cobra.Command) *cobra.Command {
	c.Args = usageArgs(cobra.NoArgs)
	c.RunE = func(c *cobra.Command, args []string) error {
		return usageError{fmt.Errorf("%s needs a subcommand; see `%s --help`", c.CommandPath(), c.CommandPath())}
	}
	return c
}

func newRoot(stdout, stderr io.Writer, environ []string) *cobra.Command {
	root := groupCmd(&cobra.Command{
		Use:           "spillway",
		Short:         "Kafka to object storage, with back pressure",
		SilenceUsage:  true,
		SilenceErrors: true,
	})
	root.Args = usageArgs(func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q; commands are run, demo, verify, config check, config import, version", args[0])
		}
		return nil
	})
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(runCmd(stderr, environ), demoCmd(stdout, stderr), verifyCmd(stdout, environ), skipCmd(stdout, environ), restoreCmd(stdout, stderr, environ), configCmd(stdout, stderr, environ), versionCmd(stdout))
	return root
}

// loadConfig loads and validates the config at path. Every error is a
// usage error (exit 2); it already names the file, so nothing is added.
func loadConfig(path string, environ []string) (*config.Config, error) {
	cfg, err := config.Load(path, environ)
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, usageError{err}
	}
	return cfg, nil
}

func newLogger(w io.Writer, c config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runCmd(stderr io.Writer, environ []string) *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Consume until SIGINT/SIGTERM, then finish open files, upload, commit and exit",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return usageError{errors.New("run needs --config FILE (see `spillway config check`)")}
			}
			cfg, err := loadConfig(path, environ)
			if err != nil {
				return err
			}
			log := newLogger(stderr, cfg.Log)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			finished := make(chan struct{})
			defer close(finished) // before stop: Run's own return is no signal
			go func() {
				select {
				case <-finished:
					return
				case <-ctx.Done():
				}
				// The default action again: a second signal ends the
				// process at once. Nothing uncommitted is claimed durable,
				// so a restart resumes from the ledger exactly once. Before
				// the log line, so that a second signal sent on seeing it
				// is never swallowed.
				stop()
				if cmd.Context().Err() == nil {
					log.Info("signal received: stopping gracefully within shutdown.timeout; a second SIGINT or SIGTERM exits at once", "deadline", cfg.Shutdown.Timeout)
				}
			}()
			return runner.Run(ctx, cfg, log, runner.Options{SetGoMemLimit: true, SetGoMaxProcs: true, Version: version})
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "", "config file (YAML)")
	return c
}

func demoCmd(stdout, stderr io.Writer) *cobra.Command {
	o := demo.Options{Records: 200_000, Partitions: 8, RecordSize: 512, Compression: "zstd"}
	var verbose bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline on an in-process broker with synthetic data into ./spillway-out",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Out == "" {
				o.Out = demo.DefaultOut()
			}
			level := "warn"
			if verbose {
				level = "info"
			}
			log := newLogger(stderr, config.Log{Level: level})
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			_, err := demo.Run(ctx, o, stdout, log)
			return err
		},
	}
	f := c.Flags()
	f.IntVar(&o.Records, "records", o.Records, "records to produce")
	f.IntVar(&o.Partitions, "partitions", o.Partitions, "partitions of the demo topic")
	f.IntVar(&o.RecordSize, "record-size", o.RecordSize, "bytes per record value")
	f.IntVar(&o.Rate, "rate", 0, "records per second to produce (0 = as fast as possible)")
	f.StringVar(&o.Compression, "compression", o.Compression, "none | gzip | snappy | zstd")
	f.StringVar(&o.Out, "out", "", "output directory (default ./spillway-out)")
	f.BoolVarP(&verbose, "verbose", "v", false, "show the pipeline's info logs")
	f.BoolVar(&o.Iceberg, "iceberg", false, "commit the files to an Apache Iceberg table, in a SQL catalog in a SQLite file under the output directory")
	return c
}

func configCmd(stdout, stderr io.Writer, environ []string) *cobra.Command {
	c := groupCmd(&cobra.Command{Use: "config", Short: "Inspect configuration"})
	c.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Validate a config and print the effective one, secrets redacted",
		Args: usageArgs(func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("config check takes exactly one FILE")
			}
			return nil
		}),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := loadConfig(args[0], environ)
			if err != nil {
				return err
			}
			out, err := cfg.YAML()
			if err != nil {
				return err
			}
			if _, err := stdout.Write(out); err != nil {
				return err
			}
			// Warnings, not errors: such a config runs, over its limit.
			warnings, err := runner.MemoryWarnings(cfg)
			for _, w := range warnings {
				fmt.Fprintln(stderr, "spillway: warning:", w)
			}
			return err
		},
	})
	c.AddCommand(importCmd(stdout, stderr))
	return c
}

// importCmd is `config import`: a Kafka Connect sink config in, Spillway
// YAML out. Every failure is the input's, so it exits 2.
func importCmd(stdout, stderr io.Writer) *cobra.Command {
	var from string
	c := &cobra.Command{
		Use:   "import FILE [--from aiven|confluent|iceberg]",
		Short: "Turn a Kafka Connect sink config (Aiven S3/GCS/Azure, Confluent S3; JSON or .properties) into Spillway YAML",
		Args: usageArgs(func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("config import takes exactly one FILE")
			}
			return nil
		}),
		RunE: func(_ *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return usageError{err}
			}
			res, err := sinks.Import(args[0], data, from)
			if err != nil {
				return usageError{err}
			}
			if _, err := stdout.Write(res.YAML); err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintln(stderr, "spillway: warning:", w)
			}
			return nil
		},
	}
	c.Flags().StringVar(&from, "from", "", "aiven, confluent or iceberg; checked against connector.class")
	return c
}

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  usageArgs(cobra.NoArgs),
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(stdout, "spillway", version)
		},
	}
}
