package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// TestRestoreAdmin restores with admin.listen on a free loopback port and
// scrapes the endpoint once the restore has ended (the afterRun hook runs
// before the server stops): the totals on /metrics are what was restored,
// and the probes answer. With admin.listen empty nothing is served.
func TestRestoreAdmin(t *testing.T) {
	cluster := testkit.NewCluster(t, 2, "orders", "orders-restored")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "orders", 200, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%03d", i)}
	})
	cfg := drain(t, restoreConfig(t, cluster.Addrs()[0], t.TempDir(), "jsonl", "base64"), nil, cl, "orders")
	ctx := context.Background()

	cfg.Admin.Listen = "127.0.0.1:0"
	var metrics string
	called := false
	f := restoreFlags{toTopic: "orders-restored", afterRun: func(addr string) {
		called = true
		if addr == "" {
			t.Fatal("admin.listen 127.0.0.1:0: no address served")
		}
		for _, p := range []string{"/healthz", "/readyz"} {
			if code, body := httpGet(t, "http://"+addr+p); code != http.StatusOK {
				t.Errorf("%s: %d %s", p, code, body)
			}
		}
		var code int
		code, metrics = httpGet(t, "http://"+addr+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, metrics)
		}
	}}
	if err := runRestore(ctx, cfg, f, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !called {
		t.Fatal("afterRun was not called")
	}
	// 200 records of 4..7 bytes of key and value; 4 files of 50 records.
	var bytes int64
	for i := range 200 {
		bytes += int64(len(fmt.Sprintf("k%d", i)) + len(fmt.Sprintf("v%03d", i)))
	}
	for _, want := range []string{
		"spillway_restore_records_total 200\n",
		fmt.Sprintf("spillway_restore_bytes_total %d\n", bytes),
		"spillway_restore_records_read_total 200\n",
		"spillway_restore_records_planned 200\n",
		"spillway_restore_records_left 0\n",
		"spillway_restore_files 4\n",
		"spillway_restore_files_done_total 4\n",
		"spillway_restore_eta_seconds 0\n",
		"spillway_restore_transactions_total 1\n", // 200 small records: one transaction
		"go_goroutines ",                          // the admin registry's own collectors
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(metrics, "spillway_records_written_total") {
		t.Error("/metrics has run's pipeline metrics, which a restore has none of")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", metrics)
	}

	// Off: the second run restores nothing new and serves nothing.
	cfg.Admin.Listen = ""
	f.afterRun = func(addr string) {
		if addr != "" {
			t.Errorf("admin.listen empty: served on %s", addr)
		}
	}
	if err := runRestore(ctx, cfg, f, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}
