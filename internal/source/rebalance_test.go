package source_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/testkit"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCleanRevokeLogsNoWarning: when a second instance joins and takes half
// the partitions, the first flushes and commits them; a clean flush must not
// be reported as files "not flushed in time" and "abandoned".
func TestCleanRevokeLogsNoWarning(t *testing.T) {
	t.Parallel()
	topic := shared.Topic(t, 4)
	cl := shared.Client(t)
	testkit.Produce(t, cl, topic, 4000, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	k := kafkaFor(shared, topic)
	k.SessionTimeout = 6 * time.Second

	var logs [2]syncBuffer
	var writers [2]*memWriter
	var runs [2]*running
	begin := func(i int) {
		// Files stay open until the revoke (or the stop) stores them.
		writers[i] = newMemWriter(nil, 0)
		runs[i] = start(t, k, budget.Plan{}, writers[i], budget.New(64<<20, 0),
			slog.New(slog.NewTextHandler(&logs[i], &slog.HandlerOptions{Level: slog.LevelInfo})))
	}
	begin(0)
	waitFor(t, "the first instance to hold open files", func() bool {
		return writers[0].Written() > 0 && len(testkit.CommittedOffsets(t, cl, k.Group, topic)) == 0
	})
	// Let it write into its files before the second joins.
	testkit.Produce(t, cl, topic, 400, func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, `{"j":%d}`, i)}
	})
	begin(1)
	waitFor(t, "the revoke to commit the moved partitions", func() bool {
		var n int64
		for _, o := range testkit.CommittedOffsets(t, cl, k.Group, topic) {
			n += o
		}
		return n > 0
	})
	for i, r := range runs {
		if runErr, err := r.stop(); runErr != nil || err != nil {
			t.Errorf("instance %d: run %v, stop %v", i, runErr, err)
		}
	}
	for i := range logs {
		if s := logs[i].String(); strings.Contains(s, "not flushed") || strings.Contains(s, "abandoned") {
			t.Errorf("instance %d logged a failed flush after a clean revoke:\n%s", i, s)
		}
	}
}

// TestStopCommitRefused: a graceful stop whose final commit the broker
// refuses fails at once with the refusal, as a failed commit (Committed),
// with the files stored (no Stored error): the runner words it so
// (runner's TestShutdownErrWording), and does not blame shutdown.timeout,
// which it used to for any failure of the stop.
func TestStopCommitRefused(t *testing.T) {
	t.Parallel()
	// Its own cluster: the control hook refuses every group's commits.
	cluster := testkit.NewCluster(t, 1, "events")
	cl := cluster.Client(t)
	testkit.Produce(t, cl, "events", 100, func(i int) *kgo.Record {
		return &kgo.Record{Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	// No stand-in refuses commits on demand: kfake's control hook answers
	// every OffsetCommit with a partition error that is not retried.
	cluster.Fake().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.Fake().KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	w := newMemWriter(nil, 0) // the stop stores the file
	r := start(t, kafkaFor(cluster, "events"), budget.Plan{}, w, budget.New(64<<20, 0), discardLog())
	waitFor(t, "every record written", func() bool { return w.Written() == 100 })
	runErr, err := r.stop()
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	if err == nil {
		t.Fatal("the stop succeeded though the commit was refused")
	}
	var se *source.ShutdownError
	if !errors.As(err, &se) || se.Stored != nil || se.Committed == nil || !errors.Is(err, kerr.OffsetMetadataTooLarge) {
		t.Errorf("stop: %#v (%v); want a ShutdownError of the refused commit (OFFSET_METADATA_TOO_LARGE) with the files stored", err, err)
	}
	if n := len(w.Stored()); n != 100 {
		t.Errorf("%d records stored by the stop, want 100", n)
	}
}

// TestRestart stops mid-stream, gracefully, and starts again: nothing is
// missing and nothing is duplicated, and after each stop the committed offsets
// are exactly what storage holds.
func TestRestart(t *testing.T) {
	t.Parallel()
	topic := shared.Topic(t, 8)
	cl := shared.Client(t)
	gen := func(i int) *kgo.Record {
		return &kgo.Record{Partition: int32(i % 8), Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	}
	testkit.Produce(t, cl, topic, 40_000, gen)
	k := kafkaFor(shared, topic)

	first := newMemWriter(nil, 700)
	r := start(t, k, budget.Plan{}, first, budget.New(64<<20, 0), discardLog())
	// Stop while consuming: after some files are durable, not all.
	waitFor(t, "five files stored", func() bool { return first.Files() >= 5 })
	if runErr, err := r.stop(); runErr != nil || err != nil {
		t.Fatalf("graceful stop: run %v, stop %v", runErr, err)
	}
	recs := first.Stored()
	stored := map[int32]int64{}
	for _, r := range recs {
		stored[r.Partition] = max(stored[r.Partition], r.Offset+1)
	}
	committed := testkit.CommittedOffsets(t, cl, k.Group, topic)
	if !maps.Equal(committed, stored) {
		t.Fatalf("after a graceful stop, committed %v != stored %v", committed, stored)
	}
	testkit.AssertExactlyOnce(t, recs, topic, stored)

	testkit.Produce(t, cl, topic, 10_000, gen)
	end := testkit.EndOffsets(t, cl, topic)
	second := newMemWriter(nil, 700)
	r2 := start(t, k, budget.Plan{}, second, budget.New(64<<20, 0), discardLog())
	stopAtEnd(t, r2, second, cl, k.Group, topic, end)
	testkit.AssertExactlyOnce(t, append(recs, second.Stored()...), topic, end)
}
