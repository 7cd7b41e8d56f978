// Package admin serves Spillway's operator endpoint over HTTP:
//
//	/metrics  Prometheus metrics (private registry, Go and process collectors)
//	/         the status page (status.html), which polls /status
//	/healthz  200 "ok" unless the pipeline is stalled (Status.Stalled)
//	/readyz   200 when ready, 503 with the reason otherwise
//	/status   the current Status as indented JSON
//
// With an Access token, /metrics, / and /status require it; the probes'
// paths, /healthz and /readyz, never do.
//
// Every value comes from one Source.Snapshot call per request, taken at
// request (scrape) time: the package runs no goroutine of its own besides the
// HTTP server, and holds no global state.
package admin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spillway/spillway/internal/hostport"
)

// DefaultListen is the default admin.listen: loopback only, by design.
// Without admin.token the endpoint has no authentication, so exposing it
// beyond the host is an explicit choice of the operator.
const DefaultListen = "127.0.0.1:8080"

// ShutdownTimeout bounds how long Run waits for in-flight requests once its
// context ends.
const ShutdownTimeout = 5 * time.Second

// Source provides the pipeline's state. Snapshot is called once per request
// to /metrics, /readyz and /status, from the HTTP server's goroutines, possibly
// concurrently: it must be safe for concurrent use, cheap, and must not block
// on I/O. The returned Status is owned by the caller (admin never modifies it).
type Source interface {
	Snapshot() Status
}

// SourceFunc adapts a function to Source.
type SourceFunc func() Status

// Snapshot calls f.
func (f SourceFunc) Snapshot() Status { return f() }

// Status is a point-in-time view of a running pipeline. It is plain data, so
// that it can be rendered as JSON on /status as is: keep secrets (credentials,
// URLs with user info) out of it.
type Status struct {
	// Ready means the storage preflight passed, the consumer is a member
	// of its group with its assignment (possibly empty) received and set
	// up, and no broker it last tried failed to connect.
	Ready bool `json:"ready"`
	// NotReadyReason says why Ready is false, for /readyz; optional.
	NotReadyReason string `json:"not_ready_reason,omitempty"`
	// NoTopicMatches: kafka.topic_regex matches no topic yet, so nothing
	// is consumed and the group is not joined; NotReadyReason says so.
	NoTopicMatches bool `json:"no_topic_matches,omitempty"`
	// FatalError is the last fatal error, if any. A Status with a fatal
	// error is never ready.
	FatalError string `json:"fatal_error,omitempty"`

	// The byte budget (package budget): limit, current use, high-water mark,
	// and the bytes held by each holder (polled_records, file_encoders,
	// queued_chunks, ...).
	BudgetLimitBytes int64            `json:"budget_limit_bytes"`
	BudgetUsedBytes  int64            `json:"budget_used_bytes"`
	BudgetPeakBytes  int64            `json:"budget_peak_bytes"`
	BudgetHeldBytes  map[string]int64 `json:"budget_held_bytes"`
	// BudgetUnreservedPeakBytes is the most bytes of records larger than
	// the budget's room held at once, apart from the budget and over its
	// limit (holder polled_unreserved).
	BudgetUnreservedPeakBytes int64 `json:"budget_unreserved_peak_bytes"`
	// The budget's disk resource, with a spool (backpressure.spool_dir):
	// its limit (0 without a spool), high watermark, use, peak and
	// holders (spooled_records). SpoolFaults counts spool files that
	// failed (disk full, directory gone), whose files were then written
	// without the spool.
	DiskLimitBytes int64            `json:"disk_limit_bytes"`
	DiskHighBytes  int64            `json:"disk_high_bytes"`
	DiskUsedBytes  int64            `json:"disk_used_bytes"`
	DiskPeakBytes  int64            `json:"disk_peak_bytes"`
	DiskHeldBytes  map[string]int64 `json:"disk_held_bytes"`
	SpoolFaults    int64            `json:"spool_faults"`

	// SchemaRegistry is the schema registry client's state, with
	// schema_registry.url set; nil without.
	SchemaRegistry *RegistryStatus `json:"schema_registry,omitempty"`

	// BufferedRecords are records fetched and not yet durable.
	BufferedRecords int64 `json:"buffered_records"`
	// FetchPaused is true while fetching is paused by back pressure;
	// PausedPartitions counts the partitions currently paused.
	FetchPaused      bool `json:"fetch_paused"`
	PausedPartitions int  `json:"paused_partitions"`

	OpenFiles       int   `json:"open_files"`
	UploadsInFlight int64 `json:"uploads_in_flight"`

	// Counters since the process started.
	FilesUploaded  int64 `json:"files_uploaded"`
	BytesUploaded  int64 `json:"bytes_uploaded"`
	RecordsWritten int64 `json:"records_written"`
	RecordsSkipped int64 `json:"records_skipped"`
	// RecordsLost counts offsets passed without being stored, by cause
	// (retention).
	RecordsLost         map[string]int64 `json:"records_lost,omitempty"`
	RecordsDeadLettered int64            `json:"records_dead_lettered"`
	// FilesClosed counts closed files by rotation reason (records, bytes,
	// age, pressure, open_files, revoke, shutdown). Include every reason,
	// with 0 where none happened, so that rate() works from the first scrape.
	FilesClosed map[string]int64 `json:"files_closed"`

	// CommittedOffsets are the offsets committed to Kafka, by topic and
	// partition: the next offset to consume, as Kafka defines a commit.
	CommittedOffsets map[string]map[int32]int64 `json:"committed_offsets"`

	// Stalled means the pipeline made no progress for StallTimeout while
	// it lagged, and not because the budget held it back: /healthz fails
	// with StalledReason. The zero value is healthy.
	Stalled             bool    `json:"stalled"`
	StalledReason       string  `json:"stalled_reason,omitempty"`
	StallTimeoutSeconds float64 `json:"stall_timeout_seconds"`
	// LastProgressSeconds is how long ago the pipeline last progressed
	// (or had nothing to do).
	LastProgressSeconds float64 `json:"last_progress_seconds"`

	// BudgetHighBytes is the budget's high watermark: above it fetching
	// pauses.
	BudgetHighBytes int64 `json:"budget_high_bytes"`
	// Pauses counts back-pressure pauses; PausedSeconds their total time.
	Pauses        int64   `json:"pauses"`
	PausedSeconds float64 `json:"paused_seconds"`
	// LagRecords is the sum of the assigned partitions' lag.
	LagRecords int64 `json:"lag_records"`
	// Partitions lists the assigned partitions.
	Partitions []Partition `json:"partitions"`
	// Throughput holds recent samples, oldest first.
	Throughput []Sample `json:"throughput"`
	// RecentCloses are the last files closed, newest first.
	RecentCloses []FileClose `json:"recent_closes"`
	// Version is the build's version, for spillway_build_info.
	Version string `json:"version"`
	// Warnings are what the process was started despite, for as long as
	// it runs (a store that ignores create-only writes, acknowledged by
	// storage.conditional_writes: unsafe_ignore).
	Warnings []string `json:"warnings,omitempty"`
	// Restore is a running `spillway restore`'s progress; nil for run.
	Restore *RestoreStatus `json:"restore,omitempty"`
}

// RegistryStatus is the schema registry client's state. While Waiting,
// every partition's consumption waits for the registry to answer (nothing
// is dropped): that explains a lack of progress, so it is not a stall.
type RegistryStatus struct {
	SchemasFetched int64 `json:"schemas_fetched"`
	UnknownIDs     int64 `json:"unknown_ids"`  // ids the registry answered 404 for: their records go to the error policy
	FailedTries    int64 `json:"failed_tries"` // failed requests to an unreachable or failing registry, retried with backoff
	Waiting        bool  `json:"waiting"`
	// Undeclared counts JSON Schema values decoded for avro or parquet
	// that had properties their schema does not declare, which the files
	// leave out.
	Undeclared int64 `json:"undeclared"`
}

// Partition is one assigned partition's state.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Paused    bool   `json:"paused"`
	// Committed is the committed offset (-1: none yet by this process);
	// HighWatermark the end offset the last fetch saw, or the last
	// listing while fetching is paused (-1: none yet).
	Committed     int64 `json:"committed"`
	HighWatermark int64 `json:"high_watermark"`
	// Lag is HighWatermark minus Committed (or minus the first offset
	// fetched before any commit); 0 when unknown.
	Lag       int64    `json:"lag"`
	OpenFiles []string `json:"open_files,omitempty"`
	// OpenRecords counts the records in the open files.
	OpenRecords int64 `json:"open_records"`
}

// Sample is the throughput over one sampling interval.
type Sample struct {
	Time             time.Time `json:"time"`
	RecordsPerSecond float64   `json:"records_per_second"`
	BytesPerSecond   float64   `json:"bytes_per_second"`
	// LagRecords is the total lag at the sample.
	LagRecords int64 `json:"lag_records"`
}

// FileClose is a file the sink closed.
type FileClose struct {
	Time    time.Time `json:"time"`
	Key     string    `json:"key"`
	Topic   string    `json:"topic"`
	Part    int32     `json:"partition"`
	Reason  string    `json:"reason"`
	Records int64     `json:"records"`
}

// Server is the admin HTTP endpoint. Create it with New or NewWithListener,
// then call Run once.
type Server struct {
	listen string
	src    Source
	log    *slog.Logger
	reg    *prometheus.Registry
	access Access

	mu sync.Mutex
	ln net.Listener // set by NewWithListener, or by Run once bound
}

// New returns a server that will listen on listen (host:port, as
// hostport.Listen takes it) when Run is called. An empty listen disables the endpoint.
// A nil log discards logs. extra collectors (the Kafka client's, storage's)
// are served on /metrics besides Spillway's own.
func New(listen string, src Source, log *slog.Logger, extra ...prometheus.Collector) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{listen: listen, src: src, log: log, reg: newRegistry(src, extra)}
}

// NewWithListener returns a server that serves on ln. Run closes ln; if Run is
// never called, the caller closes it. Use it to bind before Run (port 0 in
// tests, or to fail early on a busy port).
func NewWithListener(ln net.Listener, src Source, log *slog.Logger, extra ...prometheus.Collector) *Server {
	s := New(ln.Addr().String(), src, log, extra...)
	s.ln = ln
	return s
}

// WithAccess sets how the endpoint is protected; call it before Run or
// Handler. It returns s.
func (s *Server) WithAccess(a Access) *Server {
	s.access = a
	return s
}

// Addr returns the address the server listens on, with the real port when
// admin.listen asked for port 0. It is empty before Run has bound the address
// (unless the server was built with NewWithListener) and when disabled.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Run serves until ctx ends, then shuts down, waiting up to ShutdownTimeout
// for requests in flight. It returns nil after a clean stop, and an error
// when admin.listen is invalid, the address can't be bound, the server
// fails, or the shutdown deadline passes (connections are then closed).
//
// When the server is disabled (New with an empty listen) Run returns nil at
// once, without waiting for ctx: it holds no goroutine, so a caller that
// waits for all its components is not held up by it.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		if s.listen == "" {
			s.log.Info("admin endpoint disabled (admin.listen is empty)")
			return nil
		}
		if err := hostport.Listen(s.listen); err != nil {
			return fmt.Errorf("admin.listen %q %w; use host:port such as %s, or \"\" to disable the endpoint", s.listen, err, DefaultListen)
		}
		var err error
		var lc net.ListenConfig
		if ln, err = lc.Listen(ctx, "tcp", s.listen); err != nil {
			return fmt.Errorf("admin.listen %q: %w", s.listen, err)
		}
		s.mu.Lock()
		s.ln = ln
		s.mu.Unlock()
	}
	addr := ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && s.access.Token == "" {
		s.log.Warn("admin endpoint listens beyond loopback without admin.token: /metrics and /status are open to anyone who reaches it", "addr", addr)
	}
	scheme := "http"
	if s.access.TLS != nil {
		ln = tls.NewListener(ln, s.access.TLS.Clone())
		scheme = "https"
	}

	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // Serve closes ln when it returns
	s.log.Info("admin endpoint serving", "addr", addr, "scheme", scheme, "token", s.access.Token != "", "paths", "/metrics /healthz /readyz /status")

	select {
	case err := <-served:
		return fmt.Errorf("admin: serving on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		_ = srv.Close()
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("admin: stopping the server on %s: %w", addr, err)
	}
	return nil
}

// Handler returns the endpoint's routes, for tests or for mounting elsewhere.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.access.protect(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})))
	// The probes' paths stay open: the kubelet sends no token.
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /{$}", s.access.protect(http.HandlerFunc(s.page)))
	mux.Handle("GET /status", s.access.protect(http.HandlerFunc(s.status)))
	return mux
}

// healthz is the liveness probe: it fails only when restarting may help,
// a pipeline stalled while it lags (see Status.Stalled). Back pressure and
// a lost broker are not failures of the process.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	st := s.src.Snapshot()
	if st.Stalled {
		writeText(w, http.StatusServiceUnavailable, "stalled: "+st.StalledReason+"\n")
		return
	}
	writeText(w, http.StatusOK, "ok\n")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	st := s.src.Snapshot()
	switch {
	case st.FatalError != "":
		writeText(w, http.StatusServiceUnavailable, "not ready: fatal error: "+st.FatalError+"\n")
	case !st.Ready:
		why := st.NotReadyReason
		if why == "" {
			why = "the consumer has not joined its group or the storage preflight has not passed"
		}
		writeText(w, http.StatusServiceUnavailable, "not ready: "+why+"\n")
	default:
		writeText(w, http.StatusOK, "ready\n")
	}
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	b, err := json.MarshalIndent(s.src.Snapshot(), "", "  ")
	if err != nil { // Status is plain data: this would be a bug
		s.log.Error("admin: encoding /status", "err", err)
		writeText(w, http.StatusInternalServerError, "encoding status: "+err.Error()+"\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// newRegistry builds the private registry: Go runtime, process, and
// Spillway's own metrics. Nothing is registered globally.
func newRegistry(src Source, extra []prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
		newCollector(src),
	)
	reg.MustRegister(extra...)
	return reg
}
