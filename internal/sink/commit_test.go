package sink_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

func TestNothingCommittableBeforeFlush(t *testing.T) {
	h := newHarness(t)
	h.write(recs("t", 0, 0, 5)...)
	h.write(recs("t", 1, 100, 103)...) // a partition that starts mid-log
	h.write(recs("u", 0, 7, 8)...)
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable before Flush = %v, want nothing", got)
	}
	select {
	case <-h.s.Durable():
		t.Fatal("Durable fired with nothing uploaded")
	default:
	}
	durable := h.s.Durable()
	h.flush()
	select {
	case <-durable:
	default:
		t.Fatal("Durable did not fire after files became durable")
	}
	// only limits the partitions popped.
	if got := h.s.Committable(map[offsets.TopicPartition]bool{tp("t", 1): true}); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 1): 103}) {
		t.Fatalf("Committable(only t/1) = %v", got)
	}
	want := map[offsets.TopicPartition]int64{tp("t", 0): 5, tp("u", 0): 8}
	if got := h.s.Committable(nil); !maps.Equal(got, want) {
		t.Fatalf("Committable = %v, want %v", got, want)
	}
	// What was returned is popped.
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("second Committable = %v, want nothing new", got)
	}
	h.write(recs("t", 0, 5, 6)...)
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable with a new open file = %v", got)
	}
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 6}) {
		t.Fatalf("Committable = %v", got)
	}
	h.contiguous(h.objects()[:2], map[offsets.TopicPartition]int64{tp("t", 0): 6})
}

func TestFlushSomePartitions(t *testing.T) {
	h := newHarness(t)
	h.write(recs("t", 0, 0, 3)...)
	h.write(recs("t", 1, 0, 4)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.s.Flush(ctx, map[offsets.TopicPartition]bool{tp("t", 1): true}, offsets.ReasonRevoke); err != nil {
		t.Fatal(err)
	}
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 1): 4}) {
		t.Fatalf("Committable = %v, want only the flushed partition", got)
	}
	st := h.s.Stats()
	if st.Closed[offsets.ReasonRevoke] != 1 || st.FilesOpen != 1 {
		t.Fatalf("%+v", st)
	}
	if objs := h.objects(); len(objs) != 1 || objs[0].key != key("t", 1, 0) {
		t.Fatalf("objects %v", objs)
	}
}

// A partition's files are published in offset order: while one is held,
// the next waits (its parts may stream, its final step may not), and the
// offset never passes the held file. Storage so never holds a later file
// without the earlier ones, which resuming from the last file relies on.
func TestPartitionFilesPublishInOrder(t *testing.T) {
	h := newHarness(t, withGate(), withConfig(func(c *sink.Config) {
		c.MaxRecords = 5
		c.NullValues = "ignore"
	}))
	release := h.gate.hold(key("t", 0, 100))
	defer release()

	h.write(recs("t", 0, 100, 110)...) // two files: [100,105) held, [105,110) behind it
	h.gate.awaitCommit(t, key("t", 0, 100))
	if st := h.s.Stats(); st.Uploading != 2 {
		t.Fatalf("Uploading = %d, want both files", st.Uploading)
	}
	// The second file's goroutine waits on the first's end, so its
	// commit cannot start however long this waits.
	time.Sleep(100 * time.Millisecond)
	if got := h.gate.started(); len(got) != 0 {
		t.Fatalf("commits %v started while %s is held", got, key("t", 0, 100))
	}
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable = %v while [100,105) is not stored", got)
	}

	// A skipped record with no file open is durable at once, but still
	// waits behind the held file; so does a new open file.
	h.write(null("t", 0, 110))
	h.write(rec("t", 0, 111))
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable = %v while [100,105) is not stored", got)
	}
	if st := h.s.Stats(); st.Uploading != 2 {
		t.Fatalf("Uploading = %d, want 2 (the held file and the one behind it)", st.Uploading)
	}

	durable := h.s.Durable()
	release()
	select {
	case <-durable:
	case <-time.After(10 * time.Second):
		t.Fatal("Durable never fired after the held upload completed")
	}
	var got map[offsets.TopicPartition]int64
	h.eventually("offset 111 to be committable", func() bool {
		got = h.committed(got)
		return got[tp("t", 0)] == 111
	})
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 112}) {
		t.Fatalf("Committable after Flush = %v, want 112", got)
	}
	if len(h.gate.files()) != 3 {
		t.Fatalf("stored %d files, want 3", len(h.gate.files()))
	}
	if got, want := h.gate.started(), []string{key("t", 0, 105), key("t", 0, 111)}; !slices.Equal(got, want) {
		t.Fatalf("commits after the release %v, want %v", got, want)
	}
}

// When a partition's file fails, the files after it are abandoned, never
// published: storage keeps a gap-free prefix, and the failure is reported.
func TestFailedFileAbandonsLaterFiles(t *testing.T) {
	h := newHarness(t, withGate(), withConfig(func(c *sink.Config) { c.MaxRecords = 5 }))
	release := h.gate.hold(key("t", 0, 0))
	h.gate.fail(key("t", 0, 0), errors.New("injected: storage refused the object"))
	h.write(recs("t", 0, 0, 15)...) // [0,5) fails, [5,10) and [10,15) behind it
	h.write(recs("t", 1, 0, 5)...)  // another partition, unaffected
	h.gate.awaitCommit(t, key("t", 0, 0))
	release()
	err := h.s.Flush(context.Background(), nil, offsets.ReasonShutdown)
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Flush = %v, want the injected failure", err)
	}
	files := h.gate.files()
	for _, k := range []string{key("t", 0, 0), key("t", 0, 5), key("t", 0, 10)} {
		if _, ok := files[k]; ok {
			t.Fatalf("%s stored after the partition's earlier file failed: %v", k, slices.Sorted(maps.Keys(files)))
		}
	}
	if got := h.s.Committable(nil); got[tp("t", 0)] != 0 {
		t.Fatalf("Committable = %v, want nothing for t/0", got)
	}
}

// A lost partition's files that are not yet published stay unpublished,
// and when the partition comes back its new files don't wait on them.
func TestDropAbandonsUnpublishedFiles(t *testing.T) {
	h := newHarness(t, withGate(), withConfig(func(c *sink.Config) { c.MaxRecords = 5 }))
	release := h.gate.hold(key("t", 0, 0))
	defer release()
	h.write(recs("t", 0, 0, 10)...)
	h.gate.awaitCommit(t, key("t", 0, 0))
	h.s.Drop(map[offsets.TopicPartition]bool{tp("t", 0): true})
	release()
	// Back again, resumed at 5 (say the new owner had stored [0,5)).
	h.write(recs("t", 0, 5, 10)...)
	h.flush()
	files := h.gate.files()
	if _, ok := files[key("t", 0, 5)]; !ok {
		t.Fatalf("the returned partition's file was not stored: %v", slices.Sorted(maps.Keys(files)))
	}
	if got := h.s.Committable(nil); got[tp("t", 0)] != 10 {
		t.Fatalf("Committable = %v, want 10 for t/0", got)
	}
}

// Rotation never waits for storage: closed files commit in the background
// and their bytes stay counted in the budget, which is what slows
// consumption. A stuck commit holds back only its own offsets.
func TestRotationDoesNotWaitForStorage(t *testing.T) {
	h := newHarness(t, withGate(), withConfig(func(c *sink.Config) { c.MaxRecords = 1 }))
	base := h.b.Snapshot().Used
	release := h.gate.hold(key("t", 0, 0))
	defer release()
	h.write(rec("t", 0, 0))
	h.gate.awaitCommit(t, key("t", 0, 0))

	done := make(chan error, 1)
	go func() {
		done <- h.s.Write(context.Background(), append(recs("t", 0, 1, 2), rec("t", 1, 0)))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write blocked behind a stuck commit")
	}
	if used := h.b.Snapshot().Used; used <= base {
		t.Fatalf("budget %d does not count the files waiting for storage (base %d)", used, base)
	}
	h.eventually("the other partition's file to be stored", func() bool { return h.s.Stats().FilesUploaded == 1 })
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 1): 1}) {
		t.Fatalf("Committable = %v while t/0's first file is still held, want only t/1", got)
	}
	release()
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 2}) {
		t.Fatalf("Committable = %v, want 2", got)
	}
	h.eventually("the budget to drain", func() bool { return h.b.Snapshot().Used == base })
}

func TestFlushCancelledWhileUploading(t *testing.T) {
	h := newHarness(t, withGate())
	release := h.gate.hold(key("t", 0, 0))
	defer release()
	h.write(rec("t", 0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.s.Flush(ctx, nil, offsets.ReasonShutdown) }()
	h.gate.awaitCommit(t, key("t", 0, 0))
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Flush = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Flush ignored its ctx")
	}
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable = %v while the upload is held", got)
	}
	release()
	h.flush()
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 0): 1}) {
		t.Fatalf("Committable = %v", got)
	}
}

// putObject stores an object beside the sink, as a previous run would have.
func putObject(t *testing.T, b *storage.Bucket, key string) {
	t.Helper()
	w, err := b.NewWriter(context.Background(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestUploadErrorIsFatal(t *testing.T) {
	h := newHarness(t)
	putObject(t, h.bucket, key("t", 0, 0)) // create-only: the sink's commit fails
	h.write(recs("t", 0, 0, 3)...)
	h.write(recs("t", 1, 0, 3)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.s.Flush(ctx, nil, offsets.ReasonShutdown)
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("Flush = %v, want the upload's ErrExists", err)
	}
	if !errors.Is(h.s.Err(), storage.ErrExists) {
		t.Fatalf("Err = %v", h.s.Err())
	}
	if err := h.s.Write(context.Background(), recs("t", 1, 3, 4)); err == nil {
		t.Fatal("Write accepted records after a fatal upload error")
	}
	// Partition 1 was stored; partition 0 never becomes committable.
	if got := h.s.Committable(nil); !maps.Equal(got, map[offsets.TopicPartition]int64{tp("t", 1): 3}) {
		t.Fatalf("Committable = %v, want only t/1", got)
	}
	if got := h.localFiles(); strings.Join(got, " ") != key("t", 0, 0)+" "+key("t", 1, 0) {
		t.Fatalf("files %v: want the old object untouched and no temp files", got)
	}
}

// Flush(tps) waits for the files it closed; a file opened afterwards by a
// concurrent Write is not its business.
func TestFlushPartitionsWaitsOnlyForItsFiles(t *testing.T) {
	h := newHarness(t, withGate())
	release := h.gate.hold(key("t", 0, 0))
	defer release()
	h.write(recs("t", 0, 0, 2)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- h.s.Flush(ctx, map[offsets.TopicPartition]bool{tp("t", 0): true}, offsets.ReasonRevoke)
	}()
	h.gate.awaitCommit(t, key("t", 0, 0))
	h.write(rec("t", 0, 2)) // opens a new file while Flush waits
	release()
	if err := <-done; err != nil {
		t.Fatalf("Flush = %v, want nil once its file is durable", err)
	}
}

func TestFlushPartitionsReturnsUploadError(t *testing.T) {
	h := newHarness(t)
	putObject(t, h.bucket, key("t", 0, 0))
	h.write(recs("t", 0, 0, 3)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.s.Flush(ctx, map[offsets.TopicPartition]bool{tp("t", 0): true}, offsets.ReasonRevoke)
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("Flush(t/0) = %v, want the upload's ErrExists", err)
	}
}

// Write, Tick, Flush of some partitions and Committable from different
// goroutines, as the source, ticker and committer call them.
func TestConcurrentCallers(t *testing.T) {
	h := newHarness(t, withConfig(func(c *sink.Config) { c.MaxRecords = 7; c.MaxAge = time.Hour }))
	const parts, n = 4, 300
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup

	wg.Add(1)
	go func() { // ticker: every tick closes everything open
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := h.s.Tick(ctx, time.Now().Add(2*time.Hour)); err != nil {
				t.Error(err)
				return
			}
			_ = h.s.Stats()
		}
	}()
	var mu sync.Mutex
	committed := map[offsets.TopicPartition]int64{}
	wg.Add(1)
	go func() { // committer
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-h.s.Durable():
			case <-time.After(time.Millisecond):
			}
			mu.Lock()
			committed = h.committed(committed)
			mu.Unlock()
		}
	}()
	// A revoke-style flush of one partition, now and then. It stops before
	// the ticker does: a Flush that races a Write may also wait for the
	// file that Write opened, which only the ticker closes.
	stopFlush, flushDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(flushDone)
		for i := 0; ; i++ {
			select {
			case <-stopFlush:
				return
			default:
			}
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := h.s.Flush(fctx, map[offsets.TopicPartition]bool{tp("t", int32(i%parts)): true}, offsets.ReasonRevoke)
			cancel()
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()

	for off := int64(0); off < n; off++ {
		batch := recs("t", 0, 0, 0)
		for p := int32(0); p < parts; p++ {
			batch = append(batch, rec("t", p, off))
		}
		if err := h.s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	close(stopFlush)
	<-flushDone
	close(stop)
	wg.Wait()
	h.flush()
	committed = h.committed(committed)
	want := map[offsets.TopicPartition]int64{}
	for p := int32(0); p < parts; p++ {
		want[tp("t", p)] = n
	}
	if !maps.Equal(committed, want) {
		t.Fatalf("committed %v, want %v", committed, want)
	}
	h.contiguous(h.objects(), want)
}
