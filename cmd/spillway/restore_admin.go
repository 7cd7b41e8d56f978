package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/restore"
)

// serveRestoreAdmin serves the admin endpoint for a restore when
// admin.listen is set, with live's counters on /metrics, on the server's
// own registry. It binds before the restore starts, so that a taken port
// fails the command rather than leaving it unobserved. It returns the bound
// address ("" when admin.listen is empty) and a func that stops the server.
func serveRestoreAdmin(cfg *config.Config, live *restore.Live, stderr io.Writer) (string, func(), error) {
	if cfg.Admin.Listen == "" {
		return "", func() {}, nil
	}
	access, err := admin.LoadAccess(cfg.Admin.Token, cfg.Admin.TokenFile, cfg.Admin.TLS.CertFile, cfg.Admin.TLS.KeyFile)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return "", nil, fmt.Errorf("admin.listen %q: %w; choose a free host:port, or \"\" to disable the endpoint", cfg.Admin.Listen, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// A restore has no consumer group to join nor pipeline to stall: it is
	// ready and healthy while it runs, and its own figures are restore's:
	// /status and the status page's restore section, and /metrics.
	status := admin.SourceFunc(func() admin.Status {
		return admin.Status{Ready: true, Version: version, Restore: restoreStatus(live)}
	})
	srv := admin.NewForCommand(ln, status, log, live.Collector()).WithAccess(access)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	return ln.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			log.Warn("admin endpoint", "err", err)
		}
	}, nil
}

// restoreStatus is live's progress for /status and the status page.
func restoreStatus(live *restore.Live) *admin.RestoreStatus {
	s := live.Stats()
	out := &admin.RestoreStatus{
		RecordsPlanned: s.Total, RecordsRead: s.Read, RecordsDone: s.Committed, RecordsSkipped: s.Skipped,
		BytesDone: s.CommittedBytes, RecordsLeft: s.Left, RecordsPerSecond: s.Rate, ETASeconds: s.ETA.Seconds(),
		Transactions: s.Txns, Partitions: []admin.RestorePartition{},
	}
	for _, p := range live.Partitions() {
		out.Partitions = append(out.Partitions, admin.RestorePartition{
			Topic: p.Topic, Partition: p.Partition, ToTopic: p.To,
			FromOffset: p.From, EndOffset: p.End, NextOffset: p.Next,
			RecordsPlanned: p.Planned, RecordsRead: p.Read, RecordsDone: p.Committed, RecordsSkipped: p.Skipped,
			BytesDone: p.Bytes, RecordsPerSecond: p.Rate, ETASeconds: p.ETA.Seconds(),
			Transaction: p.Txn, Done: p.Done,
		})
	}
	return out
}
