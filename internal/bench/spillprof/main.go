// Command spillprof is `spillway run --config FILE` with a CPU profile:
// the same code path (config.Load, runner.Run with the process's memory
// limit), written to -cpuprofile when it stops. userbench -profile runs it
// in place of the spillway binary; cmd/spillway itself has no profiling
// flag, and a user's binary should not grow one for the benchmark's sake.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/runner"
)

func main() {
	path := flag.String("config", "", "config file (YAML)")
	out := flag.String("cpuprofile", "", "write a CPU profile here")
	traceOut := flag.String("trace", "", "write a runtime execution trace here (go tool trace): where the file goroutines wait")
	flag.Parse()
	if err := run(*path, *out, *traceOut); err != nil {
		fmt.Fprintf(os.Stderr, "spillprof: %v\n", err)
		os.Exit(1)
	}
}

func run(path, out, traceOut string) error {
	cfg, err := config.Load(path, os.Environ())
	if err != nil {
		return err
	}
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if traceOut != "" {
		f, err := os.Create(traceOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return runner.Run(ctx, cfg, log, runner.Options{SetGoMemLimit: true, SetGoMaxProcs: true, Version: "spillprof"})
}
