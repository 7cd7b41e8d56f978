package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/admin"
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
	var metrics, status, page string
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
		if code, status = httpGet(t, "http://"+addr+"/status"); code != http.StatusOK {
			t.Fatalf("/status: %d %s", code, status)
		}
		if code, page = httpGet(t, "http://"+addr+"/"); code != http.StatusOK {
			t.Fatalf("/: %d %s", code, page)
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
	partBytes := map[int32]int64{}
	for i := range 200 {
		n := int64(len(fmt.Sprintf("k%d", i)) + len(fmt.Sprintf("v%03d", i)))
		bytes += n
		partBytes[int32(i%2)] += n
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
		// Per partition: 100 records each, source offsets 0-100, all done.
		`spillway_restore_partition_records_total{partition="0",to_topic="orders-restored",topic="orders"} 100` + "\n",
		`spillway_restore_partition_records_total{partition="1",to_topic="orders-restored",topic="orders"} 100` + "\n",
		fmt.Sprintf(`spillway_restore_partition_bytes_total{partition="1",to_topic="orders-restored",topic="orders"} %d`+"\n", partBytes[1]),
		`spillway_restore_partition_records_read_total{partition="0",to_topic="orders-restored",topic="orders"} 100` + "\n",
		`spillway_restore_partition_records_planned{partition="1",to_topic="orders-restored",topic="orders"} 100` + "\n",
		`spillway_restore_partition_records_left{partition="0",to_topic="orders-restored",topic="orders"} 0` + "\n",
		`spillway_restore_partition_next_offset{partition="1",to_topic="orders-restored",topic="orders"} 100` + "\n",
		`spillway_restore_partition_end_offset{partition="0",to_topic="orders-restored",topic="orders"} 100` + "\n",
		`spillway_restore_partition_in_transaction{partition="0",to_topic="orders-restored",topic="orders"} 0` + "\n",
		`spillway_restore_partition_eta_seconds{partition="1",to_topic="orders-restored",topic="orders"} 0` + "\n",
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

	// /status has the restore's section, each partition's row; the page
	// renders it (its section and the script that fills it).
	var st admin.Status
	if err := json.Unmarshal([]byte(status), &st); err != nil {
		t.Fatalf("/status: %v\n%s", err, status)
	}
	if st.Restore == nil {
		t.Fatalf("/status has no restore section:\n%s", status)
	}
	r := st.Restore
	if r.RecordsPlanned != 200 || r.RecordsDone != 200 || r.BytesDone != bytes || r.RecordsLeft != 0 || r.Transactions != 1 || r.ETASeconds != 0 || len(r.Partitions) != 2 {
		t.Errorf("/status restore totals: %+v", r)
	}
	for i, p := range r.Partitions {
		want := admin.RestorePartition{Topic: "orders", Partition: int32(i), ToTopic: "orders-restored", FromOffset: 0, EndOffset: 100, NextOffset: 100,
			RecordsPlanned: 100, RecordsRead: 100, RecordsDone: 100, BytesDone: partBytes[int32(i)], RecordsPerSecond: p.RecordsPerSecond, Transaction: "none", Done: true}
		if p != want || p.RecordsPerSecond <= 0 {
			t.Errorf("/status restore partition %d:\n got %+v\nwant %+v (and a rate above 0)", i, p, want)
		}
	}
	for _, want := range []string{`id="restore"`, `id="restore-partitions"`, "renderRestore(s)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
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
