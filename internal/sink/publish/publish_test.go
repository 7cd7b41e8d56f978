package publish_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink/publish"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var tp = offsets.TopicPartition{Topic: "t", Partition: 0}

// two opens and queues two files of tp, in order.
func two(o *publish.Order) (a, b *publish.Turn, aEncoded chan struct{}) {
	aEncoded = make(chan struct{})
	a = o.Open(tp, aEncoded)
	b = o.Open(tp, make(chan struct{}))
	o.Queue(a)
	o.Queue(b)
	return a, b, aEncoded
}

func newOrder() *publish.Order {
	return publish.New(nil, "w", ledger.Deployment{}, offsets.NewTracker())
}

// A file is published after its partition's previous file, and only if
// that one was stored.
func TestAwaitFollowsThePrevious(t *testing.T) {
	t.Parallel()
	for _, stored := range []bool{true, false} {
		o := newOrder()
		a, b, aEncoded := two(o)
		if got := b.PrevEncoded(); got != (<-chan struct{})(aEncoded) {
			t.Fatalf("PrevEncoded is not the previous file's channel")
		}
		if !o.Await(context.Background(), a) {
			t.Fatal("the first file may not be published")
		}
		if stored {
			a.Durable()
		}
		o.Ended(a)
		if got := o.Await(context.Background(), b); got != stored {
			t.Errorf("previous stored %v: Await = %v", stored, got)
		}
		o.Ended(b)
	}
}

// A stop ends the wait for the previous file: the file is not published.
func TestAwaitEndsWithContext(t *testing.T) {
	t.Parallel()
	o := newOrder()
	_, b, _ := two(o)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if o.Await(ctx, b) {
		t.Fatal("published while its previous file's upload had not ended")
	}
}

// A failed partition publishes none of its later files, even one queued
// after the failed file left the queue; Drop forgets the failure.
func TestFailStopsLaterFiles(t *testing.T) {
	t.Parallel()
	o := newOrder()
	a := o.Open(tp, nil)
	o.Queue(a)
	o.Fail(a)
	o.Ended(a)
	c := o.Open(tp, nil)
	o.Queue(c)
	if c.PrevEncoded() != nil {
		t.Fatal("a file queued after its predecessor ended waits for it")
	}
	if o.Await(context.Background(), c) {
		t.Fatal("a later file of a failed partition was published")
	}
	o.Ended(c)
	o.Drop(map[offsets.TopicPartition]bool{tp: true})
	d := o.Open(tp, nil)
	o.Queue(d)
	if !o.Await(context.Background(), d) {
		t.Fatal("the partition, dropped and given back, still counts as failed")
	}
	o.Ended(d)
}

// Files of a dropped partition not yet published never are.
func TestDropStopsQueuedFiles(t *testing.T) {
	t.Parallel()
	o := newOrder()
	a, b, _ := two(o)
	o.Drop(map[offsets.TopicPartition]bool{tp: true})
	if o.Await(context.Background(), a) {
		t.Fatal("a file of a dropped partition was published")
	}
	o.Ended(a)
	if o.Await(context.Background(), b) {
		t.Fatal("a file of a dropped partition was published")
	}
	o.Ended(b)
}

// Without a ledger, or for a partition given no identity, no entry is
// written and publication goes on.
func TestWriteEntryWithoutLedger(t *testing.T) {
	t.Parallel()
	o := newOrder()
	o.Assign(tp, ledger.Identity{Topic: "t"}, 3)
	a := o.Open(tp, nil)
	if err := o.WriteEntry(context.Background(), a, publish.File{Key: "k", Unit: &offsets.Unit{}, Records: 1}); err != nil {
		t.Fatal(err)
	}
	if a.Entry() != nil {
		t.Fatal("an entry without a ledger")
	}
}
