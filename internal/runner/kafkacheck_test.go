package runner

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// runStartup runs the pipeline and returns Run's error, failing the test if
// Run neither fails nor stops by the test's (generous) deadline. The Kafka
// check is bounded by a short kafka.startup_timeout; what is asserted is
// that Run stops, with the cause, not how fast.
func runStartup(t *testing.T, cfg *config.Config) error {
	t.Helper()
	cfg.Kafka.StartupTimeout = 3 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	log := testLogger(t)
	go func() { done <- Run(ctx, cfg, log, Options{}) }()
	select {
	case err := <-done:
		// Within kafka.startup_timeout, plus room for the storage check
		// before it and a loaded machine.
		if took := time.Since(start); took > cfg.Kafka.StartupTimeout+15*time.Second {
			t.Errorf("Run took %s to stop, kafka.startup_timeout is %s", took, cfg.Kafka.StartupTimeout)
		}
		return err
	case <-time.After(3 * time.Minute):
		cancel()
		<-done
		t.Fatal("Run did not stop on a setup that can't work")
		return nil
	}
}

func wantStartupErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("Run = nil, want a startup error")
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("Run = %v\nwant it to mention %q", err, p)
		}
	}
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestStartupNoBroker(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	err := runStartup(t, testConfig([]string{addr}, t.TempDir()))
	wantStartupErr(t, err, "no broker", addr, "kafka.startup_timeout", "kafka.brokers", "connection refused")
}

func TestStartupMissingTopic(t *testing.T) {
	t.Parallel()
	c := testkit.NewCluster(t, 1, "events")
	cfg := testConfig(c.Addrs(), t.TempDir())
	cfg.Kafka.Topics = []string{"events", "evnets"}
	err := runStartup(t, cfg)
	wantStartupErr(t, err, `kafka.topics: topic "evnets" does not exist`, "create it")
	if strings.Contains(err.Error(), `"events"`) {
		t.Errorf("Run = %v: names a topic that exists", err)
	}
}

// With a regex, topics may come later: no topic is required at start. A
// regex that matches nothing yet is said at start (a warning naming it)
// and in /status, where "joining" used to stand forever with nothing
// logged.
func TestStartupRegexWithoutTopics(t *testing.T) {
	t.Parallel()
	c := testkit.NewCluster(t, 1, "other")
	cfg := testConfig(c.Addrs(), t.TempDir())
	cfg.Kafka.Topics, cfg.Kafka.TopicRegex = nil, `events\..*`
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress atomic.Pointer[Progress]
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{OnStart: progress.Store})
	}()
	waitFor(t, "the pipeline to start", func() bool { return progress.Load() != nil })
	warned := logs.lines("matches no topic yet")
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], `topic_regex=events\..*`) ||
		!strings.Contains(warned[0], "keeps checking as topics are created") {
		t.Errorf("start logged %q, want one WARN naming the regex, saying it keeps checking", warned)
	}
	st := progress.Load().Status()
	if st.Ready || !st.NoTopicMatches || !strings.Contains(st.NotReadyReason, `kafka.topic_regex "events\\..*" matches no topic yet`) {
		t.Errorf("status: ready %v, no_topic_matches %v, not_ready_reason %q; want not ready because the regex matches nothing", st.Ready, st.NoTopicMatches, st.NotReadyReason)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want a clean stop", err)
	}
}

// A regex that matches a topic is not warned of, nor reported as
// matching nothing once joined.
func TestStartupRegexMatches(t *testing.T) {
	t.Parallel()
	c := testkit.NewCluster(t, 1, "events.a")
	cfg := testConfig(c.Addrs(), t.TempDir())
	cfg.Kafka.Topics, cfg.Kafka.TopicRegex = nil, `events\..*`
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress atomic.Pointer[Progress]
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{OnStart: progress.Store})
	}()
	waitFor(t, "the consumer to join with the matching topic", func() bool {
		p := progress.Load()
		return p != nil && p.Status().Ready
	})
	if st := progress.Load().Status(); st.NoTopicMatches {
		t.Errorf("status says the regex matches nothing while joined: %q", st.NotReadyReason)
	}
	if l := logs.lines("matches no topic"); len(l) != 0 {
		t.Errorf("warned of a regex that matches: %s", l[0])
	}
	if len(logs.lines("kafka.topic_regex matches topics")) != 1 {
		t.Error("start does not say how many topics the regex matches")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want a clean stop", err)
	}
}

func TestStartupMissingDeadLetterTopic(t *testing.T) {
	t.Parallel()
	c := testkit.NewCluster(t, 1, "events")
	cfg := testConfig(c.Addrs(), t.TempDir())
	cfg.Errors.Tolerance = "all"
	cfg.Errors.DeadLetterTopic = "events-dlq"
	err := runStartup(t, cfg)
	wantStartupErr(t, err, `errors.dead_letter_topic: topic "events-dlq" does not exist`)
}

func saslCluster(t *testing.T) []string {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "spill", "right"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake.ListenAddrs()
}

func TestStartupWrongPassword(t *testing.T) {
	t.Parallel()
	cfg := testConfig(saslCluster(t), t.TempDir())
	cfg.Kafka.SASL = config.SASL{Mechanism: "PLAIN", Username: "spill", Password: "wrong-secret"}
	err := runStartup(t, cfg)
	wantStartupErr(t, err, "during authentication", "kafka.sasl.username and password")
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("the password leaked into the error: %v", err)
	}
}

func TestStartupNoCredentialsForSASLBroker(t *testing.T) {
	t.Parallel()
	cfg := testConfig(saslCluster(t), t.TempDir())
	err := runStartup(t, cfg)
	wantStartupErr(t, err, "kafka.sasl")
}

func TestStartupSASLAgainstPlainBroker(t *testing.T) {
	t.Parallel()
	c := testkit.NewCluster(t, 1, "events")
	cfg := testConfig(c.Addrs(), t.TempDir())
	cfg.Kafka.SASL = config.SASL{Mechanism: "SCRAM-SHA-256", Username: "spill", Password: "pw"}
	err := runStartup(t, cfg)
	wantStartupErr(t, err, "kafka.sasl")
}

// The right password passes the check, and the run consumes.
func TestStartupSASLAccepted(t *testing.T) {
	t.Parallel()
	addrs := saslCluster(t)
	auth := plain.Auth{User: "spill", Pass: "right"}.AsMechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.SASL(auth))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	testkit.Produce(t, cl, "events", 10, func(i int) *kgo.Record { return &kgo.Record{Value: []byte("v")} })
	cfg := testConfig(addrs, t.TempDir())
	cfg.Kafka.SASL = config.SASL{Mechanism: "PLAIN", Username: "spill", Password: "right"}
	progress, stop := started(t, cfg)
	waitFor(t, "records consumed", func() bool { p := progress(); return p != nil && p.Source().Fetched == 10 })
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want a clean stop", err)
	}
}

// aclCluster is a broker with SASL and ACLs, and a user spill/pw holding
// only the given rights.
func aclCluster(t *testing.T, acls ...kfake.ACL) []string {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"),
		kfake.EnableSASL(), kfake.EnableACLs(), kfake.User("PLAIN", "spill", "pw", acls...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake.ListenAddrs()
}

func allow(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
	return kfake.ACL{Resource: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
}

func TestStartupTopicNotAuthorized(t *testing.T) {
	t.Parallel()
	cfg := testConfig(aclCluster(t,
		allow(kmsg.ACLResourceTypeGroup, "sink-test", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeGroup, "sink-test", kmsg.ACLOperationDescribe),
	), t.TempDir())
	cfg.Kafka.SASL = config.SASL{Mechanism: "PLAIN", Username: "spill", Password: "pw"}
	err := runStartup(t, cfg)
	wantStartupErr(t, err, `kafka.topics: not authorized for topic "events"`, "grant the user of kafka.sasl.username Describe and Read")
}

func TestStartupGroupNotAuthorized(t *testing.T) {
	t.Parallel()
	cfg := testConfig(aclCluster(t,
		allow(kmsg.ACLResourceTypeTopic, "events", kmsg.ACLOperationDescribe),
		allow(kmsg.ACLResourceTypeTopic, "events", kmsg.ACLOperationRead),
	), t.TempDir())
	cfg.Kafka.SASL = config.SASL{Mechanism: "PLAIN", Username: "spill", Password: "pw"}
	err := runStartup(t, cfg)
	wantStartupErr(t, err, `kafka.group: not authorized for group "sink-test"`, "grant the user of kafka.sasl.username Read on the group")
}
