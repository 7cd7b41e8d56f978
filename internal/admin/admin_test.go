package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource is a fake on purpose: Source is a plain snapshot provider with
// no behaviour of its own, so a settable Status exercises everything admin
// does. The adapter from the real pipeline is tested where it is wired.
type fakeSource struct {
	mu sync.Mutex
	st Status
}

func (f *fakeSource) Snapshot() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *fakeSource) set(mod func(*Status)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mod(&f.st)
}

func sampleStatus() Status {
	return Status{
		NotReadyReason:   "consumer group not joined yet",
		BudgetLimitBytes: 1 << 30,
		BudgetUsedBytes:  300 << 20,
		BudgetPeakBytes:  900 << 20,
		BudgetHeldBytes: map[string]int64{
			"polled_records": 100 << 20, "file_encoders": 8 << 20, "queued_chunks": 150 << 20, "closed_files": 42 << 20,
		},
		BufferedRecords:     12345,
		FetchPaused:         true,
		PausedPartitions:    3,
		OpenFiles:           7,
		UploadsInFlight:     2,
		FilesUploaded:       40,
		BytesUploaded:       5 << 30,
		RecordsWritten:      1_000_000,
		RecordsSkipped:      4,
		RecordsLost:         map[string]int64{"retention": 7},
		RecordsDeadLettered: 2,
		FilesClosed:         map[string]int64{"bytes": 30, "age": 8, "pressure": 2, "shutdown": 0},
		CommittedOffsets: map[string]map[int32]int64{
			"events": {0: 1000, 1: 2000},
			"orders": {5: 77},
		},
		BudgetHighBytes:     800 << 20,
		Pauses:              6,
		PausedSeconds:       12.5,
		LagRecords:          150,
		LastProgressSeconds: 3,
		Version:             "v1.2.3",
		Partitions: []Partition{
			{Topic: "events", Partition: 0, Committed: 1000, HighWatermark: 1100, Lag: 100},
			{Topic: "events", Partition: 1, Committed: 2000, HighWatermark: 2050, Lag: 50},
			{Topic: "orders", Partition: 5, Committed: -1, HighWatermark: -1},
		},
	}
}

// start runs a server on a loopback port chosen by the kernel and returns
// its base URL and a stop function that cancels Run and returns its error.
func start(t *testing.T, src Source) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewWithListener(ln, src, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(2 * ShutdownTimeout):
				t.Fatal("Run did not return after its context ended")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + s.Addr(), stop
}

// client has no keep-alives so no idle connection outlives a test.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// parseMetrics reads Prometheus text exposition into series -> value, with
// series written as name{label="v",...} in the order the server prints them
// (labels sorted by name), and the HELP and TYPE of each family.
func parseMetrics(t *testing.T, body string) (series map[string]float64, help, typ map[string]string) {
	t.Helper()
	series, help, typ = map[string]float64{}, map[string]string{}, map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, text, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			help[name] = text
		case strings.HasPrefix(line, "# TYPE "):
			name, text, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			typ[name] = text
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("bad sample line %q: %v", line, err)
			}
			series[line[:i]] = v
		}
	}
	return series, help, typ
}

func TestMetrics(t *testing.T) {
	st := sampleStatus()
	st.BudgetUnreservedPeakBytes = 40 << 20
	st.DiskLimitBytes, st.DiskHighBytes, st.DiskUsedBytes, st.DiskPeakBytes = 10<<30, 9<<30, 3<<30, 5<<30
	st.DiskHeldBytes = map[string]int64{"spooled_records": 3 << 30}
	st.SpoolFaults = 6
	st.SchemaRegistry = &RegistryStatus{SchemasFetched: 4, UnknownIDs: 1, FailedTries: 9, Waiting: true, Undeclared: 3}
	src := &fakeSource{st: st}
	base, stop := start(t, src)

	code, hdr, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	series, help, typ := parseMetrics(t, body)

	want := map[string]float64{
		"spillway_budget_limit_bytes":                                     1 << 30,
		"spillway_budget_used_bytes":                                      300 << 20,
		"spillway_budget_peak_bytes":                                      900 << 20,
		`spillway_budget_held_bytes{holder="polled_records"}`:             100 << 20,
		`spillway_budget_held_bytes{holder="file_encoders"}`:              8 << 20,
		`spillway_budget_held_bytes{holder="queued_chunks"}`:              150 << 20,
		`spillway_budget_held_bytes{holder="closed_files"}`:               42 << 20,
		"spillway_budget_unreserved_peak_bytes":                           40 << 20,
		"spillway_disk_budget_limit_bytes":                                10 << 30,
		"spillway_disk_budget_high_watermark_bytes":                       9 << 30,
		"spillway_disk_budget_used_bytes":                                 3 << 30,
		"spillway_disk_budget_peak_bytes":                                 5 << 30,
		`spillway_disk_budget_held_bytes{holder="spooled_records"}`:       3 << 30,
		"spillway_spool_faults_total":                                     6,
		"spillway_schema_registry_schemas_fetched_total":                  4,
		"spillway_schema_registry_unknown_ids_total":                      1,
		"spillway_schema_registry_failed_requests_total":                  9,
		"spillway_schema_registry_waiting":                                1,
		"spillway_schema_registry_undeclared_total":                       3,
		"spillway_buffered_records":                                       12345,
		"spillway_fetch_paused":                                           1,
		"spillway_fetch_paused_partitions":                                3,
		"spillway_open_files":                                             7,
		"spillway_uploads_in_flight":                                      2,
		"spillway_files_uploaded_total":                                   40,
		"spillway_bytes_uploaded_total":                                   5 << 30,
		"spillway_records_written_total":                                  1_000_000,
		"spillway_records_skipped_total":                                  4,
		"spillway_records_dead_lettered_total":                            2,
		"spillway_records_lost_total{cause=\"retention\"}":                7,
		`spillway_files_closed_total{reason="bytes"}`:                     30,
		`spillway_files_closed_total{reason="age"}`:                       8,
		`spillway_files_closed_total{reason="pressure"}`:                  2,
		`spillway_files_closed_total{reason="shutdown"}`:                  0,
		`spillway_committed_offset{partition="0",topic="events"}`:         1000,
		`spillway_committed_offset{partition="1",topic="events"}`:         2000,
		`spillway_committed_offset{partition="5",topic="orders"}`:         77,
		`spillway_partition_lag_records{partition="0",topic="events"}`:    100,
		`spillway_partition_lag_records{partition="1",topic="events"}`:    50,
		`spillway_partition_lag_records{partition="5",topic="orders"}`:    0,
		`spillway_partition_high_watermark{partition="0",topic="events"}`: 1100,
		`spillway_partition_high_watermark{partition="1",topic="events"}`: 2050,
		"spillway_lag_records":                                            150,
		"spillway_assigned_partitions":                                    3,
		"spillway_fetch_pauses_total":                                     6,
		"spillway_fetch_paused_seconds_total":                             12.5,
		"spillway_budget_high_watermark_bytes":                            800 << 20,
		"spillway_stalled":                                                0,
		"spillway_last_progress_age_seconds":                              3,
		"spillway_ready":                                                  0,
		`spillway_build_info{version="v1.2.3"}`:                           1,
	}
	for s, v := range want {
		got, ok := series[s]
		if !ok {
			t.Errorf("missing series %s", s)
		} else if got != v {
			t.Errorf("%s = %v, want %v", s, got, v)
		}
	}
	// No spillway series beyond those expected.
	for s := range series {
		if _, ok := want[s]; strings.HasPrefix(s, "spillway_") && !ok {
			t.Errorf("unexpected series %s", s)
		}
	}
	for s := range want {
		name, _, _ := strings.Cut(s, "{")
		if len(help[name]) < 20 {
			t.Errorf("%s: HELP %q should say what and why", name, help[name])
		}
		wantType := "gauge"
		if strings.HasSuffix(name, "_total") {
			wantType = "counter"
		}
		if typ[name] != wantType {
			t.Errorf("%s: TYPE %q, want %s", name, typ[name], wantType)
		}
	}
	// The Go and process collectors are registered on the private registry.
	for _, s := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := series[s]; !ok {
			t.Errorf("missing %s from the Go/process collectors", s)
		}
	}

	// Values are read at scrape time.
	src.set(func(st *Status) { st.FetchPaused = false; st.RecordsWritten = 1_000_500 })
	_, _, body = get(t, base+"/metrics")
	series, _, _ = parseMetrics(t, body)
	if series["spillway_fetch_paused"] != 0 || series["spillway_records_written_total"] != 1_000_500 {
		t.Errorf("second scrape did not see the new snapshot: paused=%v written=%v",
			series["spillway_fetch_paused"], series["spillway_records_written_total"])
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	src := &fakeSource{st: sampleStatus()}
	base, stop := start(t, src)

	if code, _, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}

	code, _, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "consumer group not joined yet") {
		t.Errorf("/readyz before ready: %d %q, want 503 with the reason", code, body)
	}
	src.set(func(st *Status) { st.NotReadyReason = "" })
	code, _, body = get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not joined its group") {
		t.Errorf("/readyz, no reason given: %d %q, want 503 with the default reason", code, body)
	}

	src.set(func(st *Status) { st.Ready = true })
	if code, _, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}

	src.set(func(st *Status) { st.FatalError = "storage: upload events-0-1000.jsonl: access denied" })
	code, _, body = get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "access denied") {
		t.Errorf("/readyz after a fatal error: %d %q, want 503 with the error", code, body)
	}
	// Liveness doesn't depend on readiness.
	if code, _, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after a fatal error: %d", code)
	}
	src.set(func(st *Status) {
		st.Stalled, st.StalledReason = true, "no progress for 5m0s while 100 records lag"
	})
	code, _, body = get(t, base+"/healthz")
	if code != http.StatusServiceUnavailable || body != "stalled: no progress for 5m0s while 100 records lag\n" {
		t.Errorf("/healthz when stalled: %d %q, want 503 with the reason", code, body)
	}
	if code, _, _ := get(t, base+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d, want 404", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// The page is served whole from the binary, and refers to nothing outside
// the process: no URL with a scheme or a protocol-relative one, and a
// policy that forbids other origins.
func TestStatusPage(t *testing.T) {
	base, stop := start(t, &fakeSource{st: sampleStatus()})
	defer func() { _ = stop() }()
	code, hdr, body := get(t, base+"/")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %d %s", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(body, `fetch("status"`) || !strings.Contains(body, `name="viewport"`) {
		t.Error("the page does not poll status, or has no viewport for phones")
	}
	// The SVG namespace is a name, not a resource.
	local := strings.ReplaceAll(body, `"http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"http://", "https://", `src="//`, `href="//`, "url(//", "@import"} {
		if strings.Contains(local, bad) {
			t.Errorf("the page refers outside the process: %q", bad)
		}
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if code, _, _ := get(t, base+"/index.html"); code != http.StatusNotFound {
		t.Errorf("/index.html: %d, want 404 (only / is the page)", code)
	}
}

func TestStatusJSON(t *testing.T) {
	want := sampleStatus()
	want.Ready = true
	src := &fakeSource{st: want}
	base, stop := start(t, src)

	code, hdr, body := get(t, base+"/status")
	if code != http.StatusOK {
		t.Fatalf("/status: %d %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("/status Content-Type %q", ct)
	}
	if !strings.Contains(body, "\n  \"ready\": true") {
		t.Errorf("/status is not indented JSON:\n%s", body)
	}
	var got Status
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("/status does not decode: %v\n%s", err, body)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("/status round trip:\n got %+v\nwant %+v", got, want)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestRunListensAndStopsCleanly(t *testing.T) {
	s := New("127.0.0.1:0", &fakeSource{}, nil)
	if s.Addr() != "" {
		t.Fatalf("Addr before Run = %q, want empty", s.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	deadline := time.Now().Add(5 * time.Second)
	for s.Addr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("Run did not bind")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The server may have bound but not yet accept; the kernel queues the
	// connection either way.
	if code, _, _ := get(t, "http://"+s.Addr()+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(2 * ShutdownTimeout):
		t.Fatal("Run did not return after cancel")
	}
	goleak.VerifyNone(t)
	if _, err := client.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Error("server still answers after Run returned")
	}
}

func TestRunDisabled(t *testing.T) {
	s := New("", &fakeSource{}, nil)
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("disabled Run = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("disabled Run did not return at once")
	}
	if s.Addr() != "" {
		t.Errorf("disabled Addr = %q", s.Addr())
	}
}

func TestBadListen(t *testing.T) {
	for _, listen := range []string{"8080", "localhost", "127.0.0.1:http-ish", "127.0.0.1:70000", "[::1:8080", "127.0.0.1:"} {
		t.Run(listen, func(t *testing.T) {
			err := New(listen, &fakeSource{}, nil).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "admin.listen") {
				t.Fatalf("Run(%q) = %v, want an error naming admin.listen", listen, err)
			}
		})
	}
}

func TestBusyPortErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = New(ln.Addr().String(), &fakeSource{}, nil).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "admin.listen") {
		t.Fatalf("Run on a busy port = %v, want an error naming admin.listen", err)
	}
}
