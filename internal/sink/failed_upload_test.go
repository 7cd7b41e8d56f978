package sink_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// Once an upload has failed, no later file of its partition may be stored,
// not even one closed after the failed upload ended (by max_age on an idle
// partition, or by the revoke of a client closing after the error): a
// restart resumes after the last stored file and would skip the failed
// file's records. TestPropCommitAndRecovery found this.
func TestNoLaterFileStoredAfterFailedUpload(t *testing.T) {
	refuse := errors.New("storage refused the upload")
	h := newHarness(t,
		withConfig(func(c *sink.Config) { c.MaxRecords = 3; c.MaxAge = time.Hour }),
		func(_ *harness, _ *sink.Config, o *storage.Options) {
			o.Faults = &storage.Faults{BeforeCommit: func(k string) error {
				if k == key("t", 0, 0) {
					return refuse
				}
				return nil
			}}
		})
	h.write(recs("t", 0, 0, 4)...) // [0,3) is closed and its upload fails; [3,4) stays open
	// Wait for the failed upload to be over entirely, so that the next file
	// is not queued behind it.
	h.eventually("the upload to fail and end", func() bool {
		return errors.Is(h.s.Err(), refuse) && busyGoroutines() == ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.s.Tick(ctx, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Flush(ctx, nil, offsets.ReasonShutdown); !errors.Is(err, refuse) {
		t.Fatalf("Flush = %v, want the failed upload's error", err)
	}
	if objs := h.objects(); len(objs) != 0 {
		next, _, _ := ledger.LegacyNextOffset(ctx, h.bucket, naming.Names{Template: h.cfg.Template}, "t", 0)
		t.Fatalf("%s stored after the upload of [0,3) failed: a restart would resume at %d and lose offsets 0-2", objs[0].key, next)
	}
	if got := h.s.Committable(nil); len(got) != 0 {
		t.Fatalf("Committable = %v after a failed upload of the first file", got)
	}
}
