package deploytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestPodServesItsProbes runs the release binary as the StatefulSet's pod
// runs it (its args, the ConfigMap's file, the pod's environment) against
// an in-process-style broker, and checks what the kubelet would see: the
// readiness and liveness probes' paths answer 200 on the admin endpoint,
// and SIGTERM ends the process, with exit 0, within
// terminationGracePeriodSeconds.
//
// The pod's brokers, TLS, SASL and bucket can't be reached here, so those
// keys, and only those, are overridden through the environment.
func TestPodServesItsProbes(t *testing.T) {
	o := build(t)
	c, file, _, env := podSetup(t, o)
	cfg, _ := configCheck(t, file, env)
	if len(cfg.Kafka.Topics) == 0 {
		t.Fatal("the config names no kafka.topics; this test seeds them in the broker")
	}

	dir := t.TempDir()
	brokerBin := filepath.Join(dir, "kfakebroker")
	cmd := exec.Command("go", "build", "-o", brokerBin, "./internal/testkit/kfakebroker")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kfakebroker: %v\n%s", err, out)
	}
	broker := exec.Command(brokerBin, "-partitions", "2", "-topics", strings.Join(cfg.Kafka.Topics, ","))
	brokerOut, err := broker.StdoutPipe()
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
	addr := firstLine(t, brokerOut, "kfakebroker", func(l string) (string, bool) { return strings.CutPrefix(l, "LISTEN ") })

	args := slices.Clone(c.Args)
	args[slices.Index(args, "--config")+1] = file
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "SPILLWAY_KAFKA_SASL_PASSWORD=")
	})
	env = append(env,
		"SPILLWAY_KAFKA_BROKERS="+addr,
		"SPILLWAY_KAFKA_TLS_ENABLED=false",
		"SPILLWAY_KAFKA_SASL_MECHANISM=",
		"SPILLWAY_KAFKA_SASL_USERNAME=",
		"SPILLWAY_STORAGE_URL=file://"+dir,
		// All interfaces still, as in the pod, on a port that is free here.
		"SPILLWAY_ADMIN_LISTEN=:0",
	)
	pod := exec.Command(releaseBinary(t), args...)
	pod.Env = env
	logs, err := pod.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	seen := &logLines{} // for failure messages
	admin := make(chan string, 1)
	go func() {
		// The JSON log (log.format json in the pod's config): the admin
		// endpoint's address is in the line that says it serves.
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			seen.add(sc.Text())
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "admin endpoint serving" {
				admin <- l.Addr
			}
		}
		exited <- pod.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = pod.Process.Kill()
			<-exited
		}
	})

	var adminAddr string
	select {
	case adminAddr = <-admin:
	case err := <-exited:
		stopped = true
		t.Fatalf("spillway exited (%v) before serving its admin endpoint; its log:\n%s", err, seen.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("spillway did not serve its admin endpoint within 2 minutes")
	}
	_, port, err := net.SplitHostPort(adminAddr)
	if err != nil {
		t.Fatalf("admin endpoint address %q: %v", adminAddr, err)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}} {
		url := "http://" + net.JoinHostPort("127.0.0.1", port) + p.probe.HTTPGet.Path
		if err := waitFor200(url, 2*time.Minute); err != nil {
			t.Fatalf("%s %s: %v; spillway's log:\n%s", p.what, url, err, seen.String())
		}
	}

	// The pod's admin.token (from the Secret) guards /metrics; the probes
	// above went without it.
	token := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SPILLWAY_ADMIN_TOKEN="); ok {
			token = v
		}
	}
	if token == "" {
		t.Fatal("the pod gets no SPILLWAY_ADMIN_TOKEN: /metrics and /status would be open to anyone the NetworkPolicy lets in")
	}
	metrics := "http://" + net.JoinHostPort("127.0.0.1", port) + "/metrics"
	for _, c := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer " + token, http.StatusOK}} {
		if got := statusOf(t, metrics, c.auth); got != c.want {
			t.Errorf("GET /metrics with Authorization %q: %d, want %d", strings.Replace(c.auth, token, "<token>", 1), got, c.want)
		}
	}

	grace := time.Duration(*o.sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	start := time.Now()
	if err := pod.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit 0; its log:\n%s", err, seen.String())
		}
		t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(grace):
		t.Fatalf("still running %v after SIGTERM: the kubelet would SIGKILL it; its log:\n%s", grace, seen.String())
	}
}

// firstLine reads r's first line and returns what parse takes from it.
func firstLine(t *testing.T, r io.Reader, what string, parse func(string) (string, bool)) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case l := <-line:
		v, ok := parse(l)
		if !ok {
			t.Fatalf("%s printed %q", what, l)
		}
		return v
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s printed nothing within 2 minutes", what)
	}
	return ""
}

// waitFor200 polls url until it answers 200 or the time is up: readiness
// comes once the group is joined and storage checked.
func waitFor200(url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err != nil {
			last = err
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no 200 within %v; last: %w", within, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// statusOf GETs url with an Authorization header (none if "") and returns
// the status code.
func statusOf(t *testing.T, url, auth string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// logLines collects a process's log lines as they come, for messages.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

// Write takes a process's output as it comes, for messages.
func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
