package runner

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/faultproxy"
)

// lockedBuffer is a log destination that a test reads while Run writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCreateOnlyIgnored: against an S3 store that ignores If-None-Match,
// Run refuses to start, saying which store and what is lost, before it
// consumes or commits anything; with storage.conditional_writes:
// unsafe_ignore it starts, logs the warning, shows it on /status and
// drains the topic.
//
// No emulator here lacks conditional writes (versitygw, fake-gcs-server
// and Azurite all enforce them), and the S3-compatible stores that do are
// not to be had, so the store is versitygw behind a proxy that drops
// If-None-Match from every request carrying it and signs the request
// again, as a store that doesn't know the header ignores it. The proxy
// counts what it dropped, so the test can't pass on a quiet proxy.
func TestCreateOnlyIgnored(t *testing.T) {
	endpoint := needEmulatorEnv(t, "SPILLWAY_TEST_S3_ENDPOINT")
	key := needEmulatorEnv(t, "AWS_ACCESS_KEY_ID")
	secret := needEmulatorEnv(t, "AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	testkit.WaitIdleConns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := "spillway-cw-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	at := func(ep string) string {
		return "s3://" + name + "?endpoint=" + ep + "&use_path_style=true&region=us-east-1"
	}
	createBucket(t, ctx, at(endpoint), name, "")
	p := faultproxy.New(t, endpoint, faultproxy.Options{PreserveHost: true,
		ResignS3: &faultproxy.S3Credentials{AccessKey: key, Secret: secret, Region: "us-east-1"}})
	strip := p.Inject(faultproxy.DropIfNoneMatch())

	cluster := testkit.NewCluster(t, 2, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 400, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 2), Value: []byte(`{"i":` + strings.Repeat("1", i%7+1) + `}`)}
	})
	end := testkit.EndOffsets(t, cl, "events")
	cfg := testConfig(cluster.Addrs(), t.TempDir())
	cfg.Storage.URL = at(p.URL())
	cfg.Storage.Prefix = "raw/"
	cfg.Storage.PartSize = 5 << 20
	cfg.File.MaxRecords = 100

	t.Run("refused", func(t *testing.T) {
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		var started atomic.Bool
		// A run that starts is stopped at once: the test fails, not hangs.
		err := Run(rctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)), Options{OnStart: func(*Progress) { started.Store(true); stop() }})
		if err == nil || started.Load() {
			t.Fatalf("Run started against a store that ignores create-only writes (err %v)", err)
		}
		t.Logf("%v", err)
		for _, w := range []string{
			"storage: s3://" + name, "ignores create-only writes", "raw/_spillway/.spillway-preflight-", "If-None-Match: *",
			"fencing against a paused previous owner of a partition is gone",
			"an object another writer put under the name of a Spillway file is silently replaced",
			"set storage.conditional_writes: unsafe_ignore",
		} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not say %q", w)
			}
		}
		if strings.Contains(logs.String(), "spillway running") {
			t.Error("the pipeline started")
		}
		if c := testkit.CommittedOffsets(t, cl, cfg.Kafka.Group, "events"); len(c) != 0 {
			t.Errorf("offsets committed: %v", c)
		}
		if strip.Count() < 2 {
			t.Errorf("the proxy dropped If-None-Match %d times, want at least the probe's two writes", strip.Count())
		}
	})

	t.Run("acknowledged", func(t *testing.T) {
		cfg := *cfg
		cfg.Kafka.Group = "sink-test-acknowledged"
		cfg.Storage.ConditionalWrites = "unsafe_ignore"
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		var progress atomic.Pointer[Progress]
		done := make(chan error, 1)
		go func() {
			done <- Run(rctx, &cfg, slog.New(slog.NewTextHandler(&logs, nil)), Options{OnStart: progress.Store})
		}()
		waitCommitted(t, cl, cfg.Kafka.Group, end)
		pr := progress.Load()
		if pr == nil {
			t.Fatal("offsets committed before Run said it started")
		}
		warnings := pr.Status().Warnings
		stop()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v\n%s", err, logs.String())
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "ignores create-only writes") ||
			!strings.Contains(warnings[0], "storage.conditional_writes is unsafe_ignore") || !strings.Contains(warnings[0], "fencing against a paused previous owner") {
			t.Errorf("/status warnings = %q", warnings)
		}
		var warn string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "ignores create-only writes") {
				warn = l
			}
		}
		if warn == "" || !strings.Contains(warn, "fencing against a paused previous owner of a partition is gone") ||
			!strings.Contains(warn, "silently replaced") {
			t.Errorf("no warning at start saying what is lost:\n%s", logs.String())
		}
		t.Log(warn)
	})
}

// TestCreateOnlyPolicy: what the preflight's finding means for each
// setting and layout. A one-object-per-key template replaces its objects
// by design, so a store without create-only writes costs it nothing.
func TestCreateOnlyPolicy(t *testing.T) {
	t.Parallel()
	b, err := storage.Open(context.Background(), "file://"+t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ignored := storage.PreflightReport{Probe: "raw/_spillway/.spillway-preflight-1", CreateOnlyIgnored: true}
	for _, tc := range []struct {
		name, setting string
		pf            storage.PreflightReport
		latest        bool
		wantWarn      bool
		wantErr       bool
	}{
		{"honest store", "required", storage.PreflightReport{}, false, false, false},
		{"honest store, acknowledged anyway", "unsafe_ignore", storage.PreflightReport{}, false, false, false},
		{"ignored, required", "required", ignored, false, false, true},
		{"ignored, acknowledged", "unsafe_ignore", ignored, false, true, false},
		{"ignored, one object per key", "required", ignored, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Storage.ConditionalWrites = tc.setting
			w, err := createOnlyPolicy(cfg, b, tc.pf, tc.latest, testLogger(t))
			if (w != "") != tc.wantWarn || (err != nil) != tc.wantErr {
				t.Errorf("warning %q, err %v", w, err)
			}
		})
	}
}
