// Command kfakebroker is a test-only Kafka broker: franz-go's kfake cluster
// (one broker) run as its own process, so that end-to-end tests can kill or
// limit Spillway while the broker lives on, and so that the broker's memory
// is not charged to Spillway's cgroup.
//
// It listens on 127.0.0.1 only. Once it is ready it prints exactly one line
// to stdout:
//
//	LISTEN 127.0.0.1:PORT
//
// and then runs until SIGTERM or SIGINT, when it closes the cluster and exits
// 0. It is built by the tests in internal/e2e and is never shipped.
//
// Usage:
//
//	kfakebroker [-port 0] [-partitions 8] [-topics events,other] [-datadir DIR]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	os.Exit(run())
}

func run() int {
	port := flag.Int("port", 0, "port to listen on, on 127.0.0.1 (0 = a random free port)")
	partitions := flag.Int("partitions", 8, "partitions of each seeded topic")
	topics := flag.String("topics", "", "comma-separated topics to create at start")
	dataDir := flag.String("datadir", "", "directory to persist the cluster's state in (kfake.DataDir); empty = memory only")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kfakebroker: unexpected arguments %q\n", flag.Args())
		return 2
	}
	if *partitions <= 0 {
		fmt.Fprintf(os.Stderr, "kfakebroker: -partitions must be > 0, got %d\n", *partitions)
		return 2
	}

	// kfake listens on 127.0.0.1 (never on all interfaces), on the given
	// port or, with port 0, on a random free one.
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port)}
	var names []string
	for _, t := range strings.Split(*topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			names = append(names, t)
		}
	}
	if len(names) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), names...))
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}

	// Catch signals before announcing readiness, so a parent that signals
	// right after reading LISTEN never kills us uncleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfakebroker: starting kfake: %v\n", err)
		return 1
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		fmt.Fprintf(os.Stderr, "kfakebroker: expected 1 listen address, got %q\n", addrs)
		return 1
	}
	fmt.Printf("LISTEN %s\n", addrs[0])

	sig := <-sigs
	fmt.Fprintf(os.Stderr, "kfakebroker: %v: closing\n", sig)
	c.Close()
	return 0
}
