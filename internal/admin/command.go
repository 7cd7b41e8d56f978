package admin

import (
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewForCommand is NewWithListener for a command other than run (restore):
// /metrics has the Go, process and build collectors and extra, without
// the pipeline's metrics, which such a command has none of and would show
// as zeros. src still answers /healthz, /readyz and /status.
func NewForCommand(ln net.Listener, src Source, log *slog.Logger, extra ...prometheus.Collector) *Server {
	s := NewWithListener(ln, src, log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	reg.MustRegister(extra...)
	s.reg = reg
	return s
}
