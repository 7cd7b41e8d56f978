package budget_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitAsync calls b.Wait in a goroutine and returns a channel that
// receives its result.
func waitAsync(ctx context.Context, b *budget.Budget) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx, nil) }()
	return done
}

// waitPaused polls until a Wait call has started blocking. Polling is only
// to observe the state; it asserts nothing about timing.
func waitPaused(t *testing.T, b *budget.Budget, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.Snapshot().Paused != want {
		if time.Now().After(deadline) {
			t.Fatalf("Snapshot().Paused never became %v", want)
		}
		time.Sleep(time.Millisecond)
	}
}

// notDone checks that Wait is still blocked. A short grace period can only
// hide a bug, never fail a correct budget.
func notDone(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) %s", err, what)
	case <-time.After(20 * time.Millisecond):
	}
}

func mustDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

func TestAcquireReleasePeakSnapshot(t *testing.T) {
	b := budget.New(1000, 0)
	if got := b.Limit(); got != 1000 {
		t.Fatalf("Limit = %d, want 1000", got)
	}
	s := b.Snapshot()
	if s.Limit != 1000 || s.Used != 0 || s.Peak != 0 || s.Records != 0 || s.Paused || len(s.By) != 0 {
		t.Fatalf("fresh snapshot = %+v", s)
	}

	b.Acquire(budget.PolledRecords, 100)
	b.Acquire(budget.FileEncoders, 300)
	b.Acquire(budget.ClosedFiles, 200)
	b.Acquire(budget.PolledRecords, 50)
	s = b.Snapshot()
	if s.Used != 650 || s.Peak != 650 {
		t.Fatalf("after acquires: used %d peak %d, want 650 650", s.Used, s.Peak)
	}
	want := []budget.HolderBytes{{budget.FileEncoders, 300}, {budget.ClosedFiles, 200}, {budget.PolledRecords, 150}}
	if len(s.By) != len(want) {
		t.Fatalf("By = %+v, want %+v", s.By, want)
	}
	for i := range want {
		if s.By[i] != want[i] {
			t.Fatalf("By = %+v, want %+v (largest first)", s.By, want)
		}
	}

	b.Release(budget.FileEncoders, 300)
	b.Release(budget.PolledRecords, 150)
	s = b.Snapshot()
	if s.Used != 200 {
		t.Fatalf("after releases: used %d, want 200", s.Used)
	}
	if s.Peak != 650 {
		t.Fatalf("peak %d, want it to stay at the high-water mark 650", s.Peak)
	}
	if s.By[0] != (budget.HolderBytes{Holder: budget.ClosedFiles, Bytes: 200}) {
		t.Fatalf("By[0] = %+v, want uploading 200", s.By[0])
	}

	// A new, higher peak replaces the old one.
	b.Acquire(budget.QueuedChunks, 700)
	if p := b.Snapshot().Peak; p != 900 {
		t.Fatalf("peak %d, want 900", p)
	}
	b.Release(budget.QueuedChunks, 700)
	b.Release(budget.ClosedFiles, 200)
	if s := b.Snapshot(); s.Used != 0 || s.Peak != 900 {
		t.Fatalf("end: used %d peak %d, want 0 900", s.Used, s.Peak)
	}

	// Zero amounts are no-ops.
	b.Acquire(budget.PolledRecords, 0)
	b.Release(budget.PolledRecords, 0)
	if s := b.Snapshot(); s.Used != 0 {
		t.Fatalf("zero acquire/release changed usage: %+v", s)
	}
}

func TestConcurrentAcquireRelease(t *testing.T) {
	b := budget.New(1<<30, 0)
	var wg sync.WaitGroup
	const workers, rounds, n = 8, 1000, 10
	for w := range workers {
		h := []budget.Holder{budget.PolledRecords, budget.FileEncoders, budget.QueuedChunks, budget.ClosedFiles}[w%4]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				b.Acquire(h, n)
				b.AddRecords(1)
				_ = b.Over()
				b.AddRecords(-1)
				b.Release(h, n)
			}
		}()
	}
	wg.Wait()
	s := b.Snapshot()
	if s.Used != 0 || s.Records != 0 {
		t.Fatalf("after balanced concurrent use: %+v", s)
	}
	if s.Peak < n || s.Peak > workers*n {
		t.Fatalf("peak %d outside [%d, %d]", s.Peak, n, workers*n)
	}
	for _, hb := range s.By {
		if hb.Bytes != 0 {
			t.Fatalf("holder %s still holds %d", hb.Holder, hb.Bytes)
		}
	}
}

func TestOverAtHighWatermark(t *testing.T) {
	b := budget.New(1000, 0) // high 900, low 700
	b.Acquire(budget.PolledRecords, 900)
	if b.Over() {
		t.Fatal("Over at exactly 90%: the watermark is 'above', not 'at'")
	}
	b.Acquire(budget.PolledRecords, 1)
	if !b.Over() {
		t.Fatal("not Over at 90% + 1 byte")
	}
	b.Release(budget.PolledRecords, 1)
	if b.Over() {
		t.Fatal("still Over after dropping back to 90%")
	}
}

func TestWaitReturnsAtOnceWhenNotOver(t *testing.T) {
	b := budget.New(1000, 0)
	b.Acquire(budget.PolledRecords, 900)
	if err := b.Wait(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if b.Snapshot().Paused {
		t.Fatal("Paused after a Wait that did not block")
	}
}

func TestWaitBlocksUntilBelowLowWatermark(t *testing.T) {
	b := budget.New(1000, 0) // high 900, low 700
	b.Acquire(budget.PolledRecords, 950)
	done := waitAsync(context.Background(), b)
	waitPaused(t, b, true)

	// Below the high watermark but not below the low one: keep waiting.
	b.Release(budget.PolledRecords, 100) // 850
	notDone(t, done, "at 85%, above the low watermark")
	b.Release(budget.PolledRecords, 150) // 700: exactly the low watermark
	notDone(t, done, "at exactly 70%: it must fall below")
	if !b.Snapshot().Paused {
		t.Fatal("not Paused while Wait blocks")
	}

	b.Release(budget.PolledRecords, 1) // 699
	if err := mustDone(t, done); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if b.Snapshot().Paused {
		t.Fatal("still Paused after Wait returned")
	}
}

func TestWaitManyWaiters(t *testing.T) {
	b := budget.New(1000, 0)
	b.Acquire(budget.ClosedFiles, 1000)
	var dones []<-chan error
	for range 5 {
		dones = append(dones, waitAsync(context.Background(), b))
	}
	waitPaused(t, b, true)
	b.Release(budget.ClosedFiles, 500)
	for _, d := range dones {
		if err := mustDone(t, d); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWaitCancelled(t *testing.T) {
	b := budget.New(1000, 0)
	b.Acquire(budget.PolledRecords, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	done := waitAsync(ctx, b)
	waitPaused(t, b, true)
	cancel()
	err := mustDone(t, done)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if b.Snapshot().Paused {
		t.Fatal("still Paused after a cancelled Wait")
	}

	// An already-expired context still returns at once when not over.
	b.Release(budget.PolledRecords, 1000)
	if err := b.Wait(ctx, nil); err != nil {
		t.Fatalf("Wait under the watermark with a dead ctx = %v, want nil", err)
	}
}

func TestRecordTrigger(t *testing.T) {
	b := budget.New(1<<30, 10) // resume below 7 records
	b.AddRecords(9)
	if b.Over() {
		t.Fatal("Over at 9 of 10 records")
	}
	b.AddRecords(1)
	if !b.Over() {
		t.Fatal("not Over at the record trigger (10 of 10)")
	}
	if s := b.Snapshot(); s.Records != 10 || s.Used != 0 {
		t.Fatalf("snapshot %+v", s)
	}
	done := waitAsync(context.Background(), b)
	waitPaused(t, b, true)
	b.AddRecords(-3) // 7
	notDone(t, done, "at 7 records, not below 70% of 10")
	b.AddRecords(-1) // 6
	if err := mustDone(t, done); err != nil {
		t.Fatal(err)
	}
	if b.Over() {
		t.Fatal("Over at 6 records")
	}
}

func TestRecordTriggerNeedsBytesBelowLowToo(t *testing.T) {
	b := budget.New(1000, 10)
	b.AddRecords(10)
	b.Acquire(budget.PolledRecords, 800) // under high, over low
	done := waitAsync(context.Background(), b)
	waitPaused(t, b, true)
	b.AddRecords(-10)
	notDone(t, done, "records are low but bytes are still above the low watermark")
	b.Release(budget.PolledRecords, 200)
	if err := mustDone(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestZeroMaxRecordsDisablesTrigger(t *testing.T) {
	b := budget.New(1000, 0)
	b.AddRecords(1 << 40)
	if b.Over() {
		t.Fatal("Over from records with the record trigger disabled")
	}
}

func TestRecordTriggerOfOneResumes(t *testing.T) {
	b := budget.New(1<<30, 1)
	b.AddRecords(1)
	if !b.Over() {
		t.Fatal("not Over at 1 of 1 records")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := waitAsync(ctx, b)
	waitPaused(t, b, true)
	b.AddRecords(-1) // nothing buffered at all
	if err := mustDone(t, done); err != nil {
		t.Fatalf("Wait with no records and no bytes held = %v, want nil", err)
	}
}

// HasRoom: a charge fits under the limit, or usage is low enough that a
// charge bigger than the gap must pass (else nothing could ever open).
func TestHasRoom(t *testing.T) {
	b := budget.New(100, 0)
	b.Acquire(budget.FileEncoders, 60)
	if !b.HasRoom(40) || !b.HasRoom(41) {
		// 60 < low watermark (70): even 41 passes.
		t.Fatalf("at 60 of 100: HasRoom(40)=%v HasRoom(41)=%v, want both true", b.HasRoom(40), b.HasRoom(41))
	}
	b.Acquire(budget.FileEncoders, 20) // 80: above the low watermark
	if !b.HasRoom(20) || b.HasRoom(21) {
		t.Fatalf("at 80 of 100: HasRoom(20)=%v HasRoom(21)=%v, want true, false", b.HasRoom(20), b.HasRoom(21))
	}
}

// WaitLow waits below the low watermark even when usage is not over the
// high one, and returns at once when it is below already.
func TestWaitLow(t *testing.T) {
	b := budget.New(100, 0)
	if err := b.WaitLow(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	b.Acquire(budget.ClosedFiles, 80) // not over (90), not low (70)
	done := make(chan error, 1)
	go func() { done <- b.WaitLow(context.Background(), nil) }()
	select {
	case err := <-done:
		t.Fatalf("WaitLow returned (%v) at 80 of 100", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.Release(budget.ClosedFiles, 15) // 65
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitLow still waiting at 65 of 100")
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Acquire(budget.ClosedFiles, 15)
	cancel()
	if err := b.WaitLow(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitLow with a cancelled context = %v", err)
	}
}

// TestDiskResource: disk has its own limit and watermarks. Fetching
// pauses while either resource is above its high watermark, and resumes
// only when both are below their low ones; the snapshot reports each
// resource by holder, and disk bytes never count against memory.
func TestDiskResource(t *testing.T) {
	b := budget.New(100, 0)
	b.SetDiskLimit(1000)
	if b.DiskLimit() != 1000 {
		t.Fatalf("DiskLimit %d", b.DiskLimit())
	}
	b.Acquire(budget.SpooledRecords, 950)
	b.Acquire(budget.FileEncoders, 10)
	if !b.Over() || !b.OverDisk() || b.OverMemory() {
		t.Fatalf("disk at 950/1000, memory at 10/100: Over %v OverDisk %v OverMemory %v, want true true false", b.Over(), b.OverDisk(), b.OverMemory())
	}
	if !b.HasRoom(90) {
		t.Fatal("disk use took memory's room")
	}
	s := b.Snapshot()
	if s.Used != 10 || s.Disk.Used != 950 || s.Disk.Limit != 1000 || s.Disk.High != 900 || s.Disk.Peak != 950 {
		t.Fatalf("snapshot %+v", s)
	}
	if len(s.Disk.By) != 1 || s.Disk.By[0] != (budget.HolderBytes{Holder: budget.SpooledRecords, Bytes: 950}) {
		t.Fatalf("disk holders %+v", s.Disk.By)
	}
	for _, h := range s.By {
		if h.Holder == budget.SpooledRecords {
			t.Fatalf("a disk holder among memory's: %+v", s.By)
		}
	}

	ctx := context.Background()
	done := waitAsync(ctx, b)
	waitPaused(t, b, true)
	// Memory goes over too, then disk falls below its low watermark:
	// still paused, memory is above its low one.
	b.Acquire(budget.FileBuffers, 85)
	b.Release(budget.SpooledRecords, 300) // 650 < 700
	notDone(t, done, "with memory above its low watermark")
	if !b.OverMemory() || b.OverDisk() {
		t.Fatalf("OverMemory %v OverDisk %v, want true false", b.OverMemory(), b.OverDisk())
	}
	// Memory below its low watermark, disk between its watermarks:
	// still paused until disk is low too.
	b.Acquire(budget.SpooledRecords, 150) // 800
	b.Release(budget.FileBuffers, 85)     // memory 10
	notDone(t, done, "with disk above its low watermark")
	b.Release(budget.SpooledRecords, 101) // 699
	if err := mustDone(t, done); err != nil {
		t.Fatal(err)
	}
	// Between the watermarks, Wait does not block.
	b.Acquire(budget.SpooledRecords, 100) // 799
	if b.Over() {
		t.Fatal("Over between the watermarks")
	}
	if err := b.Wait(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDiskOff: without SetDiskLimit, disk bytes pause nothing.
func TestDiskOff(t *testing.T) {
	b := budget.New(100, 0)
	b.Acquire(budget.SpooledRecords, 1<<40)
	if b.Over() || b.OverDisk() {
		t.Fatal("a budget without a disk limit paused on disk")
	}
	if s := b.Snapshot(); s.Used != 0 || s.Disk.Limit != 0 {
		t.Fatalf("snapshot %+v", s)
	}
}

// TestWaitRoom: WaitRoom returns once n bytes fit under the limit, or
// memory is below its low watermark; disk use does not hold it.
func TestWaitRoom(t *testing.T) {
	b := budget.New(100, 0)
	b.SetDiskLimit(10)
	b.Acquire(budget.SpooledRecords, 10)
	b.Acquire(budget.QueuedChunks, 80)
	ctx := context.Background()
	if err := b.WaitRoom(ctx, 20, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.WaitRoom(ctx, 30, nil) }()
	notDone(t, done, "with 80 of 100 used and 30 to fit")
	b.Release(budget.QueuedChunks, 10) // 70: fits
	if err := mustDone(t, done); err != nil {
		t.Fatal(err)
	}
	go func() { done <- b.WaitRoom(ctx, 1000, nil) }()
	notDone(t, done, "with memory above its low watermark")
	b.Release(budget.QueuedChunks, 1) // 69 < 70: below low, anything passes
	if err := mustDone(t, done); err != nil {
		t.Fatal(err)
	}
	// proceed lets it through, asked again on Wake.
	var mu sync.Mutex
	alone := false
	b.Acquire(budget.QueuedChunks, 50)
	go func() {
		done <- b.WaitRoom(ctx, 50, func() bool { mu.Lock(); defer mu.Unlock(); return alone })
	}()
	notDone(t, done, "before proceed said so")
	mu.Lock()
	alone = true
	mu.Unlock()
	b.Wake()
	if err := mustDone(t, done); err != nil {
		t.Fatal(err)
	}
	b.Release(budget.QueuedChunks, 50)
	cctx, cancel := context.WithCancel(ctx)
	b.Acquire(budget.QueuedChunks, 30)
	go func() { done <- b.WaitRoom(cctx, 50, nil) }()
	notDone(t, done, "before its context ended")
	cancel()
	if err := mustDone(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRoom after its context ended: %v", err)
	}
}
