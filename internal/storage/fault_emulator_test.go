package storage

// Uploads through a fault-injecting proxy in front of each emulator: every
// object must arrive whole while parts are throttled, reset mid-body,
// stalled and slowed, and every test asserts that the faults it programs
// were injected, so that a proxy that injected nothing can't pass it.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/testkit/faultproxy"

	"github.com/spillway/spillway/internal/testkit"
)

// proxied is an emulator seen through a fault proxy.
type proxied struct {
	proxy *faultproxy.Proxy
	// url is the storage URL of a bucket, through the proxy.
	url func(bucket string) string
	// throttle and internal are the backend's own 503/429 and 5xx answers.
	throttle, internal faultproxy.Fault
}

// throughProxy creates a bucket directly on the emulator, then puts a
// proxy in front of the emulator and points the client settings at it.
func throughProxy(t *testing.T, ctx context.Context, e emulator) (proxied, string) {
	t.Helper()
	name := newBucketName(t)
	raw, err := openRaw(t, ctx, e.url(name))
	if err != nil {
		t.Fatalf("open %s for setup: %v", e.url(name), err)
	}
	if err := e.create(ctx, raw, name); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	_ = raw.Close()

	switch e.name {
	case "s3":
		// SigV4 signs the Host header: keep the one the client sent.
		p := faultproxy.New(t, os.Getenv("SPILLWAY_TEST_S3_ENDPOINT"), faultproxy.Options{PreserveHost: true})
		return proxied{
			proxy: p,
			url: func(bucket string) string {
				return "s3://" + bucket + "?endpoint=" + p.URL() + "&use_path_style=true&region=us-east-1"
			},
			throttle: faultproxy.S3SlowDown(),
			internal: faultproxy.S3InternalError(),
		}, name
	case "gcs":
		// fake-gcs-server serves objects only under its public host: the
		// proxy sends the backend's Host, and rewrites the resumable
		// upload's Location to itself.
		p := faultproxy.New(t, "http://"+os.Getenv("STORAGE_EMULATOR_HOST"), faultproxy.Options{})
		t.Setenv("STORAGE_EMULATOR_HOST", p.Host())
		return proxied{
			proxy:    p,
			url:      e.url,
			throttle: faultproxy.GCSRateLimited(),
			internal: faultproxy.GCSBackendError(),
		}, name
	case "azure":
		conn := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
		endpoint, u := testkit.AzureBlobEndpoint(t, conn)
		p := faultproxy.New(t, u.Scheme+"://"+u.Host, faultproxy.Options{})
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", strings.Replace(conn, "BlobEndpoint="+endpoint, "BlobEndpoint="+p.URL()+u.Path, 1))
		return proxied{
			proxy:    p,
			url:      e.url,
			throttle: faultproxy.AzureServerBusy(),
			internal: faultproxy.AzureInternalError(),
		}, name
	}
	t.Fatalf("no proxy set-up for %s", e.name)
	return proxied{}, ""
}

// faultRetry keeps the default attempt count but shorter waits, so that a
// test with dozens of faults takes seconds, not minutes.
var faultRetry = Retry{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}

// faultObject is one object a scenario writes: big ones take the multipart,
// resumable or block path, the small one a single request.
type faultObject struct {
	key  string
	data []byte
}

func faultObjects(t *testing.T, scenario string) []faultObject {
	return []faultObject{
		{fmt.Sprintf("%s/big-1", scenario), randomBytes(t, 2*emuPartSize+emuPartSize/2)},
		{fmt.Sprintf("%s/big-2", scenario), randomBytes(t, 3*emuPartSize+1234)},
		{fmt.Sprintf("%s/small", scenario), randomBytes(t, 100<<10)},
	}
}

// writeAll writes the objects concurrently, one goroutine each, as the
// sink uploads its closed files, and returns each Commit's error.
func writeAll(ctx context.Context, b *Bucket, objs []faultObject) []error {
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Go(func() {
			w, err := writeObject(ctx, b, o.key, o.data)
			if err == nil {
				err = w.Commit()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errs
}

// checkObjects reads every object back and compares it byte for byte, and
// checks that the scenario's prefix holds nothing else.
func checkObjects(t *testing.T, ctx context.Context, b *Bucket, prefix string, objs []faultObject) {
	t.Helper()
	got := listKeys(t, ctx, b, prefix)
	if len(got) != len(objs) {
		t.Errorf("List(%s) = %v, want %d objects", prefix, got, len(objs))
	}
	for _, o := range objs {
		if got[o.key] != int64(len(o.data)) {
			t.Errorf("%s: listed size %d, want %d", o.key, got[o.key], len(o.data))
		}
		if back := readAll(t, ctx, b, o.key); sha256.Sum256(back) != sha256.Sum256(o.data) {
			t.Errorf("%s: read back %d bytes that differ from the %d written", o.key, len(back), len(o.data))
		}
	}
}

// TestEmulatorFaults writes objects bigger than one part through the proxy
// while it throttles, fails, resets, stalls and slows requests, on each
// backend. Every object must be read back complete and correct.
func TestEmulatorFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads about 200 MiB per backend through a fault proxy")
	}
	forEachEmulator(t, func(t *testing.T, e emulator) {
		// Longer than testCtx: four scenarios, one with a stall.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		px, name := throughProxy(t, ctx, e)
		b, err := Open(ctx, px.url(name), Options{PartSize: emuPartSize, UploadConcurrency: 4, Retry: faultRetry})
		if err != nil {
			t.Fatalf("Open through the proxy: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		p := px.proxy

		t.Run("throttled", func(t *testing.T) {
			// Every other part is throttled, with bursts: the throttled
			// part's retry may be throttled again.
			parts := p.Inject(faultproxy.Rule{Match: faultproxy.PartUploads, Every: 2, Fault: px.throttle})
			// And every fifth write of any kind (start, part, commit,
			// single-request upload) fails with a 5xx.
			writes := p.Inject(faultproxy.Rule{Match: faultproxy.Writes, Every: 5, Fault: px.internal})
			objs := faultObjects(t, "throttled")
			errs := writeAll(ctx, b, objs)
			parts.Release()
			writes.Release()
			for i, err := range errs {
				if err != nil {
					t.Errorf("%s: %v", objs[i].key, err)
				}
			}
			t.Logf("%d throttled parts, %d 5xx writes", parts.Count(), writes.Count())
			if parts.Count() == 0 || writes.Count() == 0 {
				t.Fatalf("faults injected: %d throttled parts, %d 5xx writes; want both > 0", parts.Count(), writes.Count())
			}
			checkObjects(t, ctx, b, "throttled/", objs)
		})

		t.Run("reset", func(t *testing.T) {
			// Count the part requests, to see that a reset part is sent
			// again on its own, not the whole object from its start.
			var partRequests atomic.Int64
			counter := p.Inject(faultproxy.Rule{Match: func(r *http.Request) bool {
				if faultproxy.PartUploads(r) {
					partRequests.Add(1)
				}
				return false
			}})
			defer counter.Release()
			// Every other part upload is cut after 1 MiB of its body.
			resets := p.Inject(faultproxy.Rule{Match: faultproxy.PartUploads, Every: 2,
				Fault: faultproxy.Fault{Kind: faultproxy.Reset, ResetAfter: 1 << 20}})
			// And the single-request upload of the small object once.
			single := p.Inject(faultproxy.Rule{Match: singleUpload, Limit: 1,
				Fault: faultproxy.Fault{Kind: faultproxy.Reset, ResetAfter: 10 << 10}})
			objs := faultObjects(t, "reset")
			errs := writeAll(ctx, b, objs)
			resets.Release()
			single.Release()
			for i, err := range errs {
				if err != nil {
					t.Errorf("%s: %v", objs[i].key, err)
				}
			}
			t.Logf("%d parts reset mid-body, %d single-request uploads reset", resets.Count(), single.Count())
			if resets.Count() == 0 || single.Count() == 0 {
				t.Fatalf("faults injected: %d part resets, %d single-upload resets; want both > 0", resets.Count(), single.Count())
			}
			checkObjects(t, ctx, b, "reset/", objs)
			// 2.5 and 3+ parts: 3 and 4 part requests when nothing fails.
			const parts = 7
			t.Logf("%d part requests for %d parts and %d resets", partRequests.Load(), parts, resets.Count())
			if extra := partRequests.Load() - parts - resets.Count(); extra != 0 {
				t.Errorf("%d part requests beyond one per part and one per reset: parts were sent again that did not fail", extra)
			}
		})

		t.Run("stall", func(t *testing.T) {
			// Storage stops answering part uploads for several seconds:
			// nothing may be committed meanwhile, and everything must be
			// once it comes back.
			stall := p.Inject(faultproxy.Rule{Match: faultproxy.PartUploads, Fault: faultproxy.Fault{Kind: faultproxy.Stall}})
			objs := faultObjects(t, "stall")[:2] // the multipart ones
			done := make(chan []error, 1)
			go func() { done <- writeAll(ctx, b, objs) }()
			testkit.Eventually(t, "a part upload to be held", func() bool { return stall.Held() > 0 })
			select {
			case errs := <-done:
				t.Fatalf("uploads finished while storage was stalled: %v", errs)
			case <-time.After(3 * time.Second):
			}
			if got := listKeys(t, ctx, b, "stall/"); len(got) != 0 {
				t.Errorf("while stalled, List(stall/) = %v, want nothing", got)
			}
			held := stall.Held()
			stall.Release()
			var errs []error
			select {
			case errs = <-done:
			case <-ctx.Done():
				t.Fatal("uploads never finished after the stall was released")
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("%s: %v", objs[i].key, err)
				}
			}
			t.Logf("%d part uploads stalled, %d held at once", stall.Count(), held)
			checkObjects(t, ctx, b, "stall/", objs)
		})

		t.Run("slow", func(t *testing.T) {
			// Every request at 8 MiB/s, both ways.
			slow := p.Inject(faultproxy.Rule{Fault: faultproxy.Fault{Kind: faultproxy.Slow, BytesPerSecond: 8 << 20}})
			objs := faultObjects(t, "slow")
			errs := writeAll(ctx, b, objs)
			for i, err := range errs {
				if err != nil {
					t.Errorf("%s: %v", objs[i].key, err)
				}
			}
			checkObjects(t, ctx, b, "slow/", objs)
			slow.Release()
			t.Logf("%d requests slowed", slow.Count())
			if slow.Count() == 0 {
				t.Fatal("no request was slowed")
			}
		})
		t.Logf("%s: %d requests through the proxy; injected %d errors, %d resets, %d stalls, %d slowed",
			e.name, p.Requests(), p.Injected(faultproxy.Error), p.Injected(faultproxy.Reset), p.Injected(faultproxy.Stall), p.Injected(faultproxy.Slow))
	})
}

// singleUpload matches an object sent in one request: S3 PutObject, a GCS
// multipart (non-resumable) upload, an Azure Put Blob.
func singleUpload(r *http.Request) bool {
	q := r.URL.Query()
	switch r.Method {
	case http.MethodPut:
		return !q.Has("uploadId") && !q.Has("upload_id") && q.Get("comp") == "" && r.ContentLength != 0
	case http.MethodPost:
		return q.Get("uploadType") == "multipart"
	}
	return false
}

// TestEmulatorRetryBound: a part that storage keeps throttling is tried
// MaxAttempts times, then the upload fails, and nothing is visible.
func TestEmulatorRetryBound(t *testing.T) {
	forEachEmulator(t, func(t *testing.T, e emulator) {
		if e.name == "gcs" {
			t.Skip("a GCS resumable-upload chunk is retried until ChunkRetryDeadline (time, see gcsChunkHook), not a number of times")
		}
		ctx := testCtx(t)
		px, name := throughProxy(t, ctx, e)
		const attempts = 3
		var rec recorder
		b, err := Open(ctx, px.url(name), Options{PartSize: emuPartSize, Observer: &rec,
			Retry: Retry{MaxAttempts: attempts, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		throttle := px.proxy.Inject(faultproxy.Rule{Match: faultproxy.PartUploads, Fault: px.throttle})
		errs := writeAll(ctx, b, []faultObject{{"bound/big", randomBytes(t, 2*emuPartSize+1)}})
		throttle.Release()
		if errs[0] == nil {
			t.Fatal("an upload whose every part is throttled succeeded")
		}
		t.Logf("after %d throttled part requests: %v", throttle.Count(), errs[0])
		if throttle.Count() != attempts {
			t.Errorf("the throttled part was tried %d times, want MaxAttempts = %d", throttle.Count(), attempts)
		}
		if got := listKeys(t, ctx, b, "bound/"); len(got) != 0 {
			t.Errorf("after the failed upload, List = %v, want nothing", got)
		}
		// Every retry is counted as throttled (Azure's hook also hears
		// the last try, which is not retried), and the failure once.
		_, failed, retries := rec.snapshot()
		scheme := map[string]string{"s3": "s3", "azure": "azblob"}[e.name]
		throttled := 0
		for _, r := range retries {
			if r == scheme+"/throttled" {
				throttled++
			}
		}
		if throttled < attempts-1 || throttled > attempts || throttled != len(retries) {
			t.Errorf("retries observed %v, want %d or %d of %s/throttled", retries, attempts-1, attempts, scheme)
		}
		if len(failed) == 0 {
			t.Errorf("the failed upload was not observed as a failure")
		}
		t.Logf("observed: retries %v, failures %v", retries, failed)
	})
}

// TestEmulatorCloseClosesConnections checks that a closed bucket leaves
// no keep-alive connection open. The SDKs' own pools (azcore's is one per
// process) would keep them until the server or a 90 s idle timeout
// closed them: a process that opens and closes stores, as tests and
// `config check` do, would hold them, and goleak would see their
// goroutines.
func TestEmulatorCloseClosesConnections(t *testing.T) {
	forEachEmulator(t, func(t *testing.T, e emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		px, name := throughProxy(t, ctx, e)
		b, err := Open(ctx, px.url(name), Options{PartSize: emuPartSize, UploadConcurrency: 4})
		if err != nil {
			t.Fatalf("Open through the proxy: %v", err)
		}
		objs := faultObjects(t, "close")
		for i, err := range writeAll(ctx, b, objs) {
			if err != nil {
				t.Fatalf("%s: %v", objs[i].key, err)
			}
		}
		checkObjects(t, ctx, b, "close/", objs)
		if n := px.proxy.OpenConns(); n == 0 {
			t.Fatal("no connection open to the proxy before Close: the test would prove nothing")
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// Close closes the client's connections; the wait is for the
		// proxy to read the FIN, on a busy machine.
		deadline := time.Now().Add(30 * time.Second)
		for px.proxy.OpenConns() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections still open 30 s after Close", px.proxy.OpenConns())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
