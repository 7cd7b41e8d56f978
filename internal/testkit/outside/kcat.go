package outside

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/testkit"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KcatHeaders are the headers KcatProduce adds to every record when asked for
// keys and headers, in this order.
var KcatHeaders = []kgo.RecordHeader{
	{Key: "h1", Value: []byte("v1")},
	{Key: "trace", Value: []byte("abc")},
}

// Kcat returns the path of the kcat binary (librdkafka's CLI). When it is not
// installed the test is skipped, or fails if SPILLWAY_TEST_REQUIRE_TOOLS=1.
func Kcat(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err == nil {
		return path
	}
	if os.Getenv(testkit.RequireToolsEnv) == "1" {
		t.Fatalf("kcat not installed (%v) and %s=1; run ./scripts/test.sh which installs it", err, testkit.RequireToolsEnv)
	}
	t.Skip("kcat not installed; run ./scripts/test.sh which installs it")
	return ""
}

// KcatProduce produces one record per line to topic with kcat, a non-Go client,
// compressed with codec ("none" or "", "gzip", "snappy", "lz4", "zstd"). A
// partition < 0 lets kcat pick partitions at random.
//
// With withKeyAndHeaders, each line must be "key<TAB>value" (kcat -K '\t') and
// every record gets the headers in KcatHeaders (h1=v1, trace=abc). Lines must
// not contain a newline; note that kcat drops empty lines.
//
// It fails the test if kcat exits non-zero, reports a delivery error, or if the
// partition's end offset did not advance by at least the number of lines
// produced.
func KcatProduce(t testing.TB, brokers []string, topic string, partition int32, codec string, lines []string, withKeyAndHeaders bool) {
	t.Helper()
	kcat := Kcat(t)
	if len(brokers) == 0 {
		t.Fatal("outside.KcatProduce: no brokers")
	}

	var in bytes.Buffer
	nonEmpty := 0
	for i, l := range lines {
		if strings.ContainsAny(l, "\n") {
			t.Fatalf("outside.KcatProduce: line %d contains a newline: %q", i, l)
		}
		if withKeyAndHeaders && !strings.Contains(l, "\t") {
			t.Fatalf("outside.KcatProduce: line %d is not key<TAB>value: %q", i, l)
		}
		if l != "" {
			nonEmpty++
		}
		in.WriteString(l)
		in.WriteByte('\n')
	}

	args := []string{
		"-P",
		"-b", strings.Join(brokers, ","),
		"-t", topic,
		"-p", strconv.Itoa(int(partition)),
		"-m", "30",
		"-X", "acks=all",
	}
	if codec != "" && codec != "none" {
		args = append(args, "-z", codec)
	}
	if withKeyAndHeaders {
		args = append(args, "-K", `\t`)
		for _, h := range KcatHeaders {
			args = append(args, "-H", h.Key+"="+string(h.Value))
		}
	}

	// Measure the end offsets before and after with our own client, so that a
	// kcat that exits 0 without delivering is caught too.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("outside.KcatProduce: new kgo client: %v", err)
	}
	defer cl.Close()
	before := kcatEnd(t, cl, topic, partition)

	ctx, cancel := context.WithTimeout(context.Background(), testkit.OpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err = cmd.Run()
	cmdline := "kcat " + strings.Join(args, " ")
	if err != nil {
		t.Fatalf("outside.KcatProduce: %s: %v\nstderr:\n%s\nstdout:\n%s", cmdline, err, stderr.String(), stdout.String())
	}
	if s := stderr.String(); strings.Contains(s, "Delivery failed") {
		t.Fatalf("outside.KcatProduce: %s exited 0 but reported failed deliveries:\n%s", cmdline, s)
	}

	after := kcatEnd(t, cl, topic, partition)
	if got := after - before; got < int64(nonEmpty) {
		t.Fatalf("outside.KcatProduce: %s: end offset grew by %d, want at least %d (the non-empty lines)\nstderr:\n%s",
			cmdline, got, nonEmpty, stderr.String())
	}
}

// kcatEnd returns the end offset of topic's partition, or the sum over all
// partitions when partition < 0.
func kcatEnd(t testing.TB, cl *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.OpTimeout)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("outside.KcatProduce: end offsets of %q: %v", topic, err)
	}
	var sum int64
	found := false
	listed.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic && (partition < 0 || o.Partition == partition) {
			sum += o.Offset
			found = true
		}
	})
	if !found {
		t.Fatalf("outside.KcatProduce: topic %q partition %d not found", topic, partition)
	}
	return sum
}
