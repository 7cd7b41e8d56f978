package source_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/source"
	"github.com/spillway/spillway/internal/testkit"
)

// A dead-lettered record keeps its key, value and headers, and gains the
// cause and where it came from.
func TestDeadLetterTo(t *testing.T) {
	c := testkit.NewCluster(t, 1, "dlq")
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &kgo.Record{Topic: "events", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
	if err := source.DeadLetterTo("dlq", func() *kgo.Client { return cl })(ctx, r, errors.New("bad record")); err != nil {
		t.Fatal(err)
	}
	rd := c.Client(t, kgo.ConsumeTopics("dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := rd.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Key) != "k" || string(recs[0].Value) != "v" {
		t.Fatalf("dead-letter topic holds %v, want the one record", recs)
	}
	h := map[string]string{}
	for _, x := range recs[0].Headers {
		h[x.Key] = string(x.Value)
	}
	want := map[string]string{"trace": "t1", "spillway.error": "bad record", "spillway.topic": "events", "spillway.partition": "3", "spillway.offset": "42"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
}
