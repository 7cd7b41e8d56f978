package runner

import (
	"bufio"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
)

// scrape is one /metrics answer: each sample by its name and labels as
// written ({a="b",c="d"}), and the metric names it has.
type scrape struct {
	samples map[string]float64
	names   map[string]bool
}

func scrapeMetrics(t *testing.T, addr string) scrape {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %s\n%s", resp.Status, b)
	}
	s := scrape{samples: map[string]float64{}, names: map[string]bool{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && (f[1] == "HELP" || f[1] == "TYPE") {
			s.names[f[2]] = true
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		s.samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// sum adds the samples of a metric whose labels contain every part given.
func (s scrape) sum(name string, parts ...string) float64 {
	var total float64
	for k, v := range s.samples {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(labels, p)
		}
		if ok {
			total += v
		}
	}
	return total
}

// TestMetricsDuringRun scrapes /metrics while storage stalls under a
// backlog and after it comes back: lag, pauses and file closes move as
// they should, and the storage, Kafka client and build metrics are there.
func TestMetricsDuringRun(t *testing.T) {
	t.Parallel()
	cluster := testkit.NewCluster(t, 4, "events")
	cl := cluster.Client(t)
	rng := rand.New(rand.NewPCG(5, 6))
	gen := func(i int) *kgo.Record { return &kgo.Record{Partition: int32(i % 4), Value: randomValue(rng, 2048)} }
	testkit.Produce(t, cl, "events", 1_000, gen)

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Admin.Listen = closedAddr(t)
	cfg.Backpressure.MemoryLimit = "64MiB"
	cfg.Format.Compression = "none"
	cfg.File.MaxRecords = 0
	// Files of 1 MiB: while storage stalls, each partition writes several
	// MiB before the budget fills, so files close by size. The age limit is
	// long enough that a slow producer on a busy machine can't close them
	// all by age first (at testConfig's 2 s it did, and the test failed
	// under load); the first, small batch closes by age after it.
	cfg.File.MaxBytes = config.MiB
	cfg.File.MaxAge = 15 * time.Second
	faults := &storage.Faults{}
	progress, stop := startedWith(t, cfg, Options{StorageFaults: faults, Version: "v9.9.9-test"})
	defer func() { faults.Resume(); _ = stop() }()
	waitCommitted(t, cl, cfg.Kafka.Group, testkit.EndOffsets(t, cl, "events"))
	// The broker answers a commit before the source records it.
	waitFor(t, "the commits recorded", func() bool { return progress().Status().LagRecords == 0 })
	waitFor(t, "the admin endpoint", func() bool {
		resp, err := http.Get("http://" + cfg.Admin.Listen + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	before := scrapeMetrics(t, cfg.Admin.Listen)
	if lag := before.sum("spillway_partition_lag_records"); lag != 0 {
		t.Errorf("lag %v with everything committed", lag)
	}
	if n := before.sum("spillway_assigned_partitions"); n != 4 {
		t.Errorf("spillway_assigned_partitions %v, want 4", n)
	}
	for _, want := range []string{
		`spillway_build_info{version="v9.9.9-test"}`,
		`spillway_ready`,
		`spillway_stalled`,
	} {
		if _, ok := before.samples[want]; !ok {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if v := before.sum("spillway_storage_request_duration_seconds_count", `backend="file"`, `op="commit"`); v == 0 {
		t.Error("no storage commit observed in spillway_storage_request_duration_seconds")
	}
	if v := before.sum("spillway_kafka_connects_total"); v == 0 {
		t.Error("spillway_kafka_connects_total is 0 after a run consumed")
	}
	if v := before.sum("spillway_kafka_fetch_bytes_total", `topic="events"`); v == 0 {
		t.Error(`spillway_kafka_fetch_bytes_total{topic="events"} is 0 after a run consumed`)
	}

	faults.Stall()
	testkit.Produce(t, cl, "events", 20_000, gen)
	waitFor(t, "fetching to pause", func() bool { return progress().Source().Paused })
	during := scrapeMetrics(t, cfg.Admin.Listen)
	if lag := during.sum("spillway_partition_lag_records"); lag <= 0 || lag > 20_000 {
		t.Errorf("lag while storage stalls: %v, want within (0, 20000]", lag)
	}
	if during.sum("spillway_fetch_paused") != 1 || during.sum("spillway_fetch_pauses_total") < 1 || during.sum("spillway_fetch_paused_partitions") != 4 {
		t.Errorf("while paused: fetch_paused %v, pauses %v, paused partitions %v",
			during.sum("spillway_fetch_paused"), during.sum("spillway_fetch_pauses_total"), during.sum("spillway_fetch_paused_partitions"))
	}
	if during.sum("spillway_stalled") != 0 {
		t.Error("stalled while the budget holds fetching back")
	}
	closedBefore := before.sum("spillway_files_closed_total")
	if c := during.sum("spillway_files_closed_total", `reason="pressure"`) + during.sum("spillway_files_closed_total", `reason="bytes"`); c == 0 {
		t.Errorf("no file closed by pressure or size while the budget filled: %v", during.samples)
	}

	faults.Resume()
	end := testkit.EndOffsets(t, cl, "events")
	waitCommitted(t, cl, cfg.Kafka.Group, end)
	waitFor(t, "fetching to resume and the commits recorded", func() bool {
		st := progress().Status()
		return !st.FetchPaused && st.LagRecords == 0
	})
	after := scrapeMetrics(t, cfg.Admin.Listen)
	if lag := after.sum("spillway_partition_lag_records"); lag != 0 {
		t.Errorf("lag %v after everything was committed", lag)
	}
	if after.sum("spillway_fetch_paused") != 0 || after.sum("spillway_fetch_paused_seconds_total") <= 0 {
		t.Errorf("after: fetch_paused %v, paused seconds %v", after.sum("spillway_fetch_paused"), after.sum("spillway_fetch_paused_seconds_total"))
	}
	if c := after.sum("spillway_files_closed_total"); c <= closedBefore {
		t.Errorf("files closed %v, not more than before the backlog (%v)", c, closedBefore)
	}
	for p, off := range end {
		key := `spillway_committed_offset{partition="` + strconv.Itoa(int(p)) + `",topic="events"}`
		if after.samples[key] != float64(off) {
			t.Errorf("%s = %v, want %d", key, after.samples[key], off)
		}
	}
	t.Logf("lag before/during/after: %v/%v/%v; pauses %v for %.1fs; files closed %v -> %v",
		before.sum("spillway_partition_lag_records"), during.sum("spillway_partition_lag_records"), after.sum("spillway_partition_lag_records"),
		after.sum("spillway_fetch_pauses_total"), after.sum("spillway_fetch_paused_seconds_total"), closedBefore, after.sum("spillway_files_closed_total"))
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}

	checkDeployMetrics(t, after)
}

// metricRef finds metric names in PromQL and in the dashboard's queries.
var metricRef = regexp.MustCompile(`\b(spillway_[a-z0-9_]+)`)

// checkDeployMetrics: every metric the alert rules and the dashboard use is
// one Spillway serves, so that they can't drift apart. A metric of the
// Kafka client that a run without errors has not created yet is found in
// the client metrics' descriptions.
func checkDeployMetrics(t *testing.T, s scrape) {
	t.Helper()
	known := map[string]bool{}
	for n := range s.names {
		known[n] = true
	}
	km := newKafkaMetrics()
	kcl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.WithHooks(km))
	if err != nil {
		t.Fatal(err)
	}
	kcl.Close()
	descs := make(chan *prometheus.Desc, 100)
	go func() { km.Describe(descs); close(descs) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			known[m[1]] = true
		}
	}
	exists := func(name string) bool {
		if known[name] {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
				return true
			}
		}
		return false
	}

	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	raw, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			refs := metricRef.FindAllString(r.Expr, -1)
			if len(refs) == 0 {
				t.Errorf("alert %s uses no spillway metric: %s", r.Alert, r.Expr)
			}
			for _, n := range refs {
				if !exists(n) {
					t.Errorf("alert %s uses %s, which /metrics does not serve", r.Alert, n)
				}
			}
		}
	}
	for _, want := range []string{"SpillwayLagGrowing", "SpillwayStalled", "SpillwayBudgetPinned", "SpillwayStorageErrors", "SpillwaySchemaRegistryUnreachable"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts.yaml has no %s", want)
		}
	}

	raw, err = os.ReadFile("../../deploy/grafana/spillway.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("spillway.json: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			for _, n := range metricRef.FindAllString(tg.Expr, -1) {
				if !exists(n) {
					t.Errorf("dashboard panel %q uses %s, which /metrics does not serve", p.Title, n)
				}
			}
		}
	}
	if exprs < 10 {
		t.Errorf("the dashboard has %d queries; expected its panels", exprs)
	}
	t.Logf("checked %d alerts and %d dashboard queries against %d metric names", len(alerts), exprs, len(known))
}
