package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// screenshotsEnv, set to 1, writes the status page's screenshots to docs/
// (to update the README's); else they go to a temporary directory.
const screenshotsEnv = "SPILLWAY_UPDATE_SCREENSHOTS"

// TestStatusPageInBrowser loads the status page in Debian's headless
// Chromium (driven by playwright-core) during a run that keeps consuming,
// and checks that the budget gauge and the partition table show live values
// that change between two looks, that nothing is fetched from elsewhere,
// and that the page fits a phone's width. It takes screenshots at
// 1366x900 and 390x844.
func TestStatusPageInBrowser(t *testing.T) {
	node, modules := testkit.Playwright(t)
	cluster := testkit.NewCluster(t, 4, "events")
	cl := cluster.Client(t)

	dir := t.TempDir()
	cfg := testConfig(cluster.Addrs(), dir)
	cfg.Admin.Listen = closedAddr(t)
	cfg.File.MaxRecords = 3000
	cfg.File.MaxAge = 3 * time.Second
	cfg.Backpressure.MemoryLimit = "128MiB"
	_, stop := started(t, cfg)
	defer func() { _ = stop() }()

	// Produce all along, at a rate that varies, so that there is always
	// something to show moving.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 8))
		for i := 0; ctx.Err() == nil; i++ {
			n := 200 + 150*(i%7)
			for j := range n {
				cl.Produce(ctx, &kgo.Record{Topic: "events", Partition: int32(j % 4), Value: randomValue(rng, 700)}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	waitFor(t, "ready", func() bool {
		resp, err := http.Get("http://" + cfg.Admin.Listen + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	out, minSamples := t.TempDir(), 3
	if os.Getenv(screenshotsEnv) == "1" {
		out, minSamples = filepath.Join(testkit.RepoRoot(t), "docs"), 40
	}
	script, err := filepath.Abs("testdata/statuspage.cjs")
	if err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer ncancel()
	profile := filepath.Join(t.TempDir(), "profile")
	cmd := exec.CommandContext(nctx, node, script, modules, "http://"+cfg.Admin.Listen+"/", out, profile, strconv.Itoa(minSamples))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("status page in Chromium: %v\n%s", err, stderr.String())
	}
	var r struct {
		First, Second struct {
			Used     string     `json:"used"`
			Segments []string   `json:"segments"`
			Holders  []string   `json:"holders"`
			Rows     [][]string `json:"rows"`
			Ready    string     `json:"ready"`
			Health   string     `json:"health"`
		}
		DesktopOverflow int `json:"desktopOverflow"`
		PhoneOverflow   int `json:"phoneOverflow"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("statuspage.cjs printed %q: %v", stdout.String(), err)
	}
	t.Logf("first look: budget %s %v, rows %v", r.First.Used, r.First.Segments, r.First.Rows)
	t.Logf("second look: budget %s %v, rows %v", r.Second.Used, r.Second.Segments, r.Second.Rows)
	if len(r.Second.Rows) != 4 {
		t.Errorf("the partition table has %d rows, want 4", len(r.Second.Rows))
	}
	if r.Second.Ready != "ready" || r.Second.Health != "healthy" {
		t.Errorf("the page says %q and %q, want ready and healthy", r.Second.Ready, r.Second.Health)
	}
	if r.DesktopOverflow > 0 || r.PhoneOverflow > 0 {
		t.Errorf("the page is wider than the viewport by %dpx (desktop), %dpx (phone)", r.DesktopOverflow, r.PhoneOverflow)
	}
	for _, name := range []string{"status-desktop.png", "status-phone.png"} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Size() < 10_000 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}
