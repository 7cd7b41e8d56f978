package deploytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alertsDir holds the alert rules and their promtool unit tests.
var alertsDir = filepath.Join(repoRoot, "deploy", "prometheus")

// tool finds a program on PATH. Missing, it fails the test where
// scripts/test.sh installs it (SPILLWAY_TEST_REQUIRE_TOOLS=1), and skips
// it elsewhere.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("SPILLWAY_TEST_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s not found, and SPILLWAY_TEST_REQUIRE_TOOLS=1: install Debian's %s (scripts/test.sh does)", name, pkg)
	}
	t.Skipf("%s not found; install Debian's %s, or run scripts/test.sh", name, pkg)
	return ""
}

// TestAlertRules runs Prometheus' own checker on alerts.yaml, and its unit
// tests (alerts_test.yaml), whose series make each alert fire and, beside
// them, series that come close must not.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = alertsDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Every alert has a test that expects it to fire.
	rules, err := os.ReadFile(filepath.Join(alertsDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(alertsDir, "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: ")
		if ok && !strings.Contains(string(tests), "alertname: "+name+"\n        exp_alerts:") {
			t.Errorf("alert %s: alerts_test.yaml has no test where it fires", name)
		}
	}
}

// TestPrometheusScrapesSpillway runs the release binary against a broker
// with admin.token_file set, and a real Prometheus on loopback that
// scrapes it with that token: the target comes up, and a Spillway metric
// can be queried through Prometheus' HTTP API.
func TestPrometheusScrapesSpillway(t *testing.T) {
	prom := tool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("scrape-token-1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broker := startBroker(t, dir, "events")
	config := filepath.Join(dir, "spillway.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `kafka:
  brokers: [%q]
  group: prometheus-test
  topics: [events]
storage:
  url: "file://%s/out"
backpressure:
  memory_limit: 256MiB
admin:
  listen: 127.0.0.1:0
  token_file: %q
log:
  format: json
`, broker, dir, tokenFile), 0o600); err != nil {
		t.Fatal(err)
	}
	target, logs := startSpillway(t, config)

	// A port that was free a moment ago: Prometheus can't be asked for
	// port 0 and tell which it took.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := l.Addr().String()
	l.Close()
	promConfig := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promConfig, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: spillway
    authorization:
      credentials_file: %q
    static_configs:
      - targets: [%q]
`, tokenFile, target), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	promLog := &logLines{}
	cmd.Stdout, cmd.Stderr = promLog, promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	api := "http://" + promAddr + "/api/v1/"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var health, lastErr string
	value := 0.0
	for health != "up" || value <= 0 {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, promLog.String())
		case <-ctx.Done():
			t.Fatalf("target %s: health %q, last error %q, spillway_budget_limit_bytes %v after 3 minutes\nprometheus:\n%s\nspillway:\n%s",
				target, health, lastErr, value, promLog.String(), logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		var targets struct {
			Data struct {
				ActiveTargets []struct {
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if promGet(ctx, api+"targets", &targets) != nil || len(targets.Data.ActiveTargets) != 1 {
			continue
		}
		health, lastErr = targets.Data.ActiveTargets[0].Health, targets.Data.ActiveTargets[0].LastError
		var q struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if promGet(ctx, api+"query?query="+url.QueryEscape(`spillway_budget_limit_bytes{job="spillway"}`), &q) != nil || len(q.Data.Result) != 1 {
			continue
		}
		if s, ok := q.Data.Result[0].Value[1].(string); ok {
			value, _ = strconv.ParseFloat(s, 64)
		}
	}
	t.Logf("prometheus scraped %s: spillway_budget_limit_bytes %v", target, value)
}

// promGet decodes a Prometheus API answer into v.
func promGet(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// startBroker builds and runs internal/testkit/kfakebroker with topics,
// until the test ends, and returns its address.
func startBroker(t *testing.T, dir string, topics ...string) string {
	t.Helper()
	bin := filepath.Join(dir, "kfakebroker")
	build := exec.Command("go", "build", "-o", bin, "./internal/testkit/kfakebroker")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kfakebroker: %v\n%s", err, out)
	}
	broker := exec.Command(bin, "-partitions", "2", "-topics", strings.Join(topics, ","))
	out, err := broker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = broker.Process.Signal(syscall.SIGTERM)
		_ = broker.Wait()
	})
	return firstLine(t, out, "kfakebroker", func(l string) (string, bool) { return strings.CutPrefix(l, "LISTEN ") })
}

// startSpillway runs the release binary with config (log.format json)
// until the test ends, and returns the admin endpoint's address, from
// the log line that says it serves, and the log so far.
func startSpillway(t *testing.T, config string) (string, *logLines) {
	t.Helper()
	cmd := exec.Command(releaseBinary(t), "run", "--config", config)
	cmd.Env = []string{"AWS_EC2_METADATA_DISABLED=true", "TMPDIR=" + t.TempDir()}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := &logLines{}
	admin := make(chan string, 1)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			seen.add(sc.Text())
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "admin endpoint serving" {
				select {
				case admin <- l.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case addr := <-admin:
		return addr, seen
	case err := <-exited:
		t.Fatalf("spillway exited (%v) before serving its admin endpoint; its log:\n%s", err, seen.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("spillway did not serve its admin endpoint within 2 minutes; its log:\n%s", seen.String())
	}
	return "", nil
}
