package runner

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/spillway/spillway/internal/testkit"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFatalStopLogsNoRevokeWarning: a fatal stop (a record the registry
// does not know, errors.tolerance none) logs its error, and not also that
// revoked partitions were "not flushed in time": the client's close
// revokes them after the sink stopped, which every fatal stop used to
// report so.
func TestFatalStopLogsNoRevokeWarning(t *testing.T) {
	t.Parallel()
	reg := testkit.StartRegistry(t, registrySeeds, "", "")
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 3, func(i int) *kgo.Record {
		if i == 1 {
			b, _ := new(sr.ConfluentHeader).AppendEncode(nil, 42, nil)
			return &kgo.Record{Value: append(b, 0)}
		}
		return &kgo.Record{Value: event(t, v1ID, i)}
	})
	cfg := registryConfig(cluster, t.TempDir(), reg.URL(), "parquet", "fatal-revoke")
	logs := &syncBuffer{}
	err := Run(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{})
	if err == nil || !strings.Contains(err.Error(), "schema id 42") {
		t.Fatalf("Run = %v, want the fatal error of schema id 42", err)
	}
	if s := logs.String(); !strings.Contains(s, "stopping after a fatal error") || strings.Contains(s, "not flushed") {
		t.Errorf("want the fatal error logged, and no revoke warning; log:\n%s", s)
	}
}
