package storage

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/spillway/spillway/internal/storage/local"
	"github.com/spillway/spillway/internal/storage/storeerr"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/faultproxy"
)

// wantFatal checks that err is a *storeerr.FatalError of kind, that storeerr.IsFatal says so,
// and that its message holds every one of want.
func wantFatal(t *testing.T, err error, kind storeerr.Kind, want ...string) *storeerr.FatalError {
	t.Helper()
	var fe *storeerr.FatalError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a *storeerr.FatalError (%v)", err, kind)
	}
	if fe.Kind != kind {
		t.Errorf("kind = %v, want %v: %v", fe.Kind, kind, err)
	}
	if !storeerr.IsFatal(err) {
		t.Errorf("storeerr.IsFatal(%v) = false", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
	return fe
}

// TestEmulatorPreflight: on a fresh bucket the preflight passes and leaves
// nothing behind.
func TestEmulatorPreflight(t *testing.T) {
	forEachEmulator(t, func(t *testing.T, e emulator) {
		ctx := testCtx(t)
		b, _ := freshBucket(t, ctx, e, Options{PartSize: emuPartSize})
		for _, prefix := range []string{"", "raw/events/"} {
			rep, err := b.Preflight(ctx, prefix)
			if err != nil {
				t.Fatalf("Preflight(%q): %v", prefix, err)
			}
			if rep.Leftover != nil {
				t.Errorf("Preflight(%q) could not delete %s: %v", prefix, rep.Probe, rep.Leftover)
			}
			if !strings.HasPrefix(rep.Probe, prefix+"_spillway/"+preflightPrefix) {
				t.Errorf("probe key %q is not in %q's state directory", rep.Probe, prefix)
			}
			if rep.CreateOnlyIgnored {
				t.Errorf("Preflight(%q): %s took a second create-only write of %s", prefix, e.name, rep.Probe)
			}
		}
		if got := listKeys(t, ctx, b, ""); len(got) != 0 {
			t.Errorf("after preflight the bucket holds %v, want nothing", got)
		}
	})
}

// TestEmulatorPreflightCreateOnlyIgnored: on an S3-compatible store that
// ignores If-None-Match, the preflight's second create-only write of its
// probe succeeds, and the report says so; the probe is still cleaned up.
// The emulators all honour create-only writes, and such stores can't be
// had here, so the store is versitygw behind a proxy that drops the header
// from every request that carries one and signs the request again (S3's
// signature covers If-None-Match), as a store that doesn't know the header
// ignores it. That the proxy really dropped it is counted, and without the
// rule the same proxy gives the honest answer.
func TestEmulatorPreflightCreateOnlyIgnored(t *testing.T) {
	e := s3Emulator(t)
	testkit.WaitIdleConns(t)
	ctx := testCtx(t)
	_, name := freshBucket(t, ctx, e, Options{PartSize: emuPartSize})
	p := faultproxy.New(t, os.Getenv("SPILLWAY_TEST_S3_ENDPOINT"), faultproxy.Options{PreserveHost: true,
		ResignS3: &faultproxy.S3Credentials{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), Secret: os.Getenv("AWS_SECRET_ACCESS_KEY"), Region: "us-east-1"}})
	u := "s3://" + name + "?endpoint=" + p.URL() + "&use_path_style=true&region=us-east-1"
	b, err := Open(ctx, u, Options{PartSize: emuPartSize})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	rep, err := b.Preflight(ctx, "raw/")
	if err != nil || rep.CreateOnlyIgnored || rep.Leftover != nil {
		t.Fatalf("through the proxy, before any header is dropped: report %+v, err %v; want an honest store", rep, err)
	}

	strip := p.Inject(faultproxy.DropIfNoneMatch())
	rep, err = b.Preflight(ctx, "raw/")
	if err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	if !rep.CreateOnlyIgnored {
		t.Errorf("Preflight did not see the second create-only write of %s succeed", rep.Probe)
	}
	if n := strip.Count(); n != 2 {
		t.Errorf("the proxy dropped If-None-Match from %d requests, want the probe's 2 writes", n)
	}
	if rep.Leftover != nil {
		t.Errorf("probe left over: %v", rep.Leftover)
	}
	if got := listKeys(t, ctx, b, ""); len(got) != 0 {
		t.Errorf("after preflight the bucket holds %v, want nothing", got)
	}
	msg := b.CreateOnlyIgnoredMessage(rep)
	for _, w := range []string{"s3://" + name, rep.Probe, "If-None-Match: *", "ignores create-only writes", "wrote it again"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message does not say %q: %s", w, msg)
		}
	}
	t.Log(msg)
	strip.Release()

	// A store can honour the header on PutObject and ignore it on
	// CompleteMultipartUpload, as gofakes3 v1.2.0 does: then every file
	// of a part or more replaces what is under its name.
	multipart := p.Inject(faultproxy.Rule{
		Match: func(r *http.Request) bool { return faultproxy.Conditional(r) && r.URL.Query().Has("uploadId") },
		Fault: faultproxy.Fault{Kind: faultproxy.Strip, Strip: []string{"If-None-Match"}},
	})
	rep, err = b.Preflight(ctx, "raw/")
	if err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	if !rep.CreateOnlyIgnored || multipart.Count() != 1 {
		t.Errorf("multipart completion without If-None-Match: CreateOnlyIgnored %v, headers dropped %d, want true and 1", rep.CreateOnlyIgnored, multipart.Count())
	}
	if msg := b.CreateOnlyIgnoredMessage(rep); !strings.Contains(msg, "CompleteMultipartUpload") {
		t.Errorf("message does not say the multipart upload was taken: %s", msg)
	}
	if got := listKeys(t, ctx, b, ""); len(got) != 0 {
		t.Errorf("after preflight the bucket holds %v, want nothing", got)
	}
	// The honest runs' refused completions left no upload open.
	var c *s3.Client
	if !b.be.(remoteBackend).r.As(&c) {
		t.Fatal("not an s3 bucket")
	}
	ups, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &name})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("%d multipart uploads left open", len(ups.Uploads))
	}
}

// TestEmulatorPreflightMissingBucket: a bucket that does not exist fails the
// preflight with a fatal error that names it and says to create it.
func TestEmulatorPreflightMissingBucket(t *testing.T) {
	forEachEmulator(t, func(t *testing.T, e emulator) {
		ctx := testCtx(t)
		name := newBucketName(t)
		b, err := Open(ctx, e.url(name), Options{PartSize: emuPartSize})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer b.Close()
		_, err = b.Preflight(ctx, "raw/")
		what := "bucket"
		if e.name == "azure" {
			what = "container"
		}
		wantFatal(t, err, storeerr.KindMissingBucket, `storage: `+what+` "`+name+`" does not exist (Spillway never creates `+what+`s: create it, or fix storage.url)`)
		t.Logf("%s: %v", e.name, err)
	})
}

// TestEmulatorPreflightWrongCredentials: a wrong key or secret fails the
// preflight as refused credentials, and the secret is not in the message.
// fake-gcs-server accepts any request without authentication, so GCS has
// no case here (the classification of GCS's 401 is unit-tested).
func TestEmulatorPreflightWrongCredentials(t *testing.T) {
	const badSecret = "wrong-secret-do-not-print"
	t.Run("s3", func(t *testing.T) {
		e := s3Emulator(t)
		testkit.WaitIdleConns(t)
		ctx := testCtx(t)
		_, name := freshBucket(t, ctx, e, Options{PartSize: emuPartSize})
		for _, tc := range []struct{ name, key, secret, code string }{
			// AWS says InvalidAccessKeyId; versitygw XAdminUserNotFound.
			{"wrong-key", "no-such-key", badSecret, "XAdminUserNotFound"},
			{"wrong-secret", os.Getenv("AWS_ACCESS_KEY_ID"), badSecret, "SignatureDoesNotMatch"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Setenv("AWS_ACCESS_KEY_ID", tc.key)
				t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
				b, err := Open(ctx, e.url(name), Options{PartSize: emuPartSize})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				_, err = b.Preflight(ctx, "raw/")
				wantFatal(t, err, storeerr.KindCredentials, `storage: the credentials were refused by bucket "`+name+`" (check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY`, tc.code)
				if strings.Contains(err.Error(), badSecret) {
					t.Errorf("error shows the secret: %v", err)
				}
				t.Logf("%v", err)
			})
		}
	})
	t.Run("azure", func(t *testing.T) {
		e := azureEmulator(t)
		testkit.WaitIdleConns(t)
		ctx := testCtx(t)
		_, name := freshBucket(t, ctx, e, Options{PartSize: emuPartSize})
		// Open reads the connection string at every call.
		conn := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
		i := strings.Index(conn, "AccountKey=")
		if i < 0 {
			t.Fatalf("connection string has no AccountKey")
		}
		const badKey = "d3Jvbmcta2V5LWRvLW5vdC1wcmludA=="
		end := strings.IndexByte(conn[i:], ';')
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", conn[:i]+"AccountKey="+badKey+conn[i+end:])
		b, err := Open(ctx, e.url(name), Options{PartSize: emuPartSize})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		_, err = b.Preflight(ctx, "raw/")
		// Azurite answers a wrong key with AuthorizationFailure; Azure
		// with AuthenticationFailed.
		wantFatal(t, err, storeerr.KindCredentials, `storage: the credentials were refused by container "`+name+`" (check AZURE_STORAGE_CONNECTION_STRING`, "AuthorizationFailure")
		if strings.Contains(err.Error(), badKey) {
			t.Errorf("error shows the key: %v", err)
		}
		t.Logf("%v", err)
	})
}

// TestEmulatorPreflightWrongRegion: versitygw checks the region of the
// signature as AWS does, and says which one it expects.
func TestEmulatorPreflightWrongRegion(t *testing.T) {
	e := s3Emulator(t)
	testkit.WaitIdleConns(t)
	ctx := testCtx(t)
	_, name := freshBucket(t, ctx, e, Options{PartSize: emuPartSize})
	u := strings.Replace(e.url(name), "region=us-east-1", "region=eu-west-1", 1)
	b, err := Open(ctx, u, Options{PartSize: emuPartSize})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Preflight(ctx, "")
	fe := wantFatal(t, err, storeerr.KindWrongRegion, `bucket "`+name+`" is in region us-east-1`, "set region=us-east-1 in storage.url")
	if fe.Region != "us-east-1" {
		t.Errorf("Region = %q, want us-east-1", fe.Region)
	}
	t.Logf("%v", err)
}

// TestEmulatorPreflightDeleteDenied: a policy that allows writing but not
// deleting passes the preflight, with the probe reported as left over. A
// proxy in front of versitygw answers every DELETE as AWS does when the
// policy lacks s3:DeleteObject.
func TestEmulatorPreflightDeleteDenied(t *testing.T) {
	e := s3Emulator(t)
	testkit.WaitIdleConns(t)
	ctx := testCtx(t)
	_, name := freshBucket(t, ctx, e, Options{PartSize: emuPartSize})
	target, err := url.Parse(os.Getenv("SPILLWAY_TEST_S3_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	u := strings.Replace(e.url(name), os.Getenv("SPILLWAY_TEST_S3_ENDPOINT"), srv.URL, 1)
	b, err := Open(ctx, u, Options{PartSize: emuPartSize})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Preflight(ctx, "raw/")
	if err != nil {
		t.Fatalf("Preflight with delete denied: %v", err)
	}
	wantFatal(t, rep.Leftover, storeerr.KindAccessDenied, `when trying to delete "`+rep.Probe+`"`)
	if got := listKeys(t, ctx, b, "raw/"); len(got) != 1 {
		t.Errorf("bucket holds %v, want the probe alone", got)
	}
	t.Logf("leftover: %v", rep.Leftover)
}

// TestPreflightBlackHole: an endpoint that accepts connections and never
// answers fails the preflight when its time is up, with a message that says
// so, rather than hanging startup. No emulator needed.
func TestPreflightBlackHole(t *testing.T) {
	// Registered first, so it runs after the deferred closes below: the
	// client's connection goroutines end once the server side is closed.
	testkit.WaitIdleConns(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	ctx := context.Background()
	b, err := Open(ctx, "s3://hole?endpoint=http://"+ln.Addr().String()+"&use_path_style=true&region=us-east-1", Options{PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const timeout = 2 * time.Second
	start := time.Now()
	_, err = b.preflight(ctx, "", timeout)
	took := time.Since(start)
	if err == nil {
		t.Fatal("preflight against a black hole succeeded")
	}
	if !strings.Contains(err.Error(), "did not answer within 2s") {
		t.Errorf("error does not say the store did not answer: %v", err)
	}
	// Generous: the bound is what matters, not the machine's speed.
	if took > timeout+time.Minute {
		t.Errorf("preflight took %v with a %v timeout", took, timeout)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
}

// TestLocalPreflight: a writable directory passes and keeps nothing; a
// prefix whose directory can't be created fails with the path.
func TestLocalPreflight(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(context.Background(), "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := b.Preflight(context.Background(), "raw/x/")
	if err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	if rep.CreateOnlyIgnored {
		t.Errorf("a local directory took a second create-only write of %s", rep.Probe)
	}
	var left []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("preflight left %v", left)
	}
	// What a process killed during its check left: a probe and a probe's
	// temp file. The next start removes them once older than any check
	// can run, and leaves a fresh one, of a check in flight, alone.
	state := filepath.Join(dir, "raw", "x", "_spillway")
	old := []string{preflightPrefix + "0123456789abcdef", local.TempPrefix + preflightPrefix + "0123456789abcdef.42"}
	fresh := filepath.Join(state, preflightPrefix+"fedcba9876543210")
	for _, name := range old {
		p := filepath.Join(state, name)
		if err := os.WriteFile(p, []byte(preflightData), 0o644); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-2 * PreflightTimeout)
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(fresh, []byte(preflightData), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Preflight(context.Background(), "raw/x/"); err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	for _, name := range old {
		if _, err := os.Stat(filepath.Join(state, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a stale probe left by an earlier start is still there: %s (%v)", name, err)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the probe of a check in flight was removed: %v", err)
	}

	// A regular file where the prefix needs a directory (root ignores
	// permission bits, so modes can't make the test fail).
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = b.Preflight(context.Background(), "file/sub/")
	if err == nil || !strings.Contains(err.Error(), "can't create directory "+filepath.Join(dir, "file", "sub")) {
		t.Errorf("Preflight under a file: %v", err)
	}
}
