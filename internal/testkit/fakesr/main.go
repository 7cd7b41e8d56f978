// Command fakesr is a test-only schema registry: franz-go's srfake (an
// in-memory Confluent-compatible registry) served as its own process, so
// that tests reach it over HTTP as Spillway reaches a real one, and can stop
// it and start it again on the same port.
//
// It listens on 127.0.0.1 only. Once it is ready it prints exactly one line
// to stdout:
//
//	LISTEN 127.0.0.1:PORT
//
// and then serves until SIGTERM or SIGINT. -seed names a JSON file of
// schemas to register at start, each with its id, so that a restarted
// registry serves the same ids:
//
//	[{"subject": "events-value", "version": 1, "id": 1, "schemaType": "AVRO", "schema": "..."}]
//
// -user and -password require HTTP basic auth. It is built by tests and is
// never shipped.
package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func main() { os.Exit(run()) }

func run() int {
	port := flag.Int("port", 0, "port to listen on, on 127.0.0.1 (0 = a random free port)")
	seed := flag.String("seed", "", "JSON file of schemas to register at start")
	user := flag.String("user", "", "basic auth user to require")
	pass := flag.String("password", "", "basic auth password to require")
	flag.Parse()

	var opts []srfake.Option
	if *user != "" {
		opts = append(opts, srfake.WithAuth("Basic "+base64.StdEncoding.EncodeToString([]byte(*user+":"+*pass))))
	}
	reg := srfake.NewRegistry(opts...)
	if *seed != "" {
		b, err := os.ReadFile(*seed)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakesr: %v\n", err)
			return 2
		}
		var schemas []sr.SubjectSchema
		if err := json.Unmarshal(b, &schemas); err != nil {
			fmt.Fprintf(os.Stderr, "fakesr: %s: %v\n", *seed, err)
			return 2
		}
		for _, s := range schemas {
			reg.SeedSchema(s.Subject, s.Version, s.ID, s.Schema)
		}
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakesr: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: reg.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("LISTEN %s\n", ln.Addr())
	select {
	case <-sigs:
		_ = srv.Close()
		<-done
		return 0
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "fakesr: %v\n", err)
		return 1
	}
}
