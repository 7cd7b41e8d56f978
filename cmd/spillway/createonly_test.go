package main

import (
	"testing"

	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/faultproxy"
)

// TestBinaryRunCreateOnlyIgnored: `spillway run` against an S3 store that
// ignores If-None-Match exits 1 at startup, naming the store, what is lost
// and the key that accepts it, before it consumes or commits anything.
// No emulator lacks conditional writes, so the store is versitygw behind a
// proxy that drops the header and signs the request again, as a store
// that doesn't know the header ignores it.
func TestBinaryRunCreateOnlyIgnored(t *testing.T) {
	spillwayBinary(t)
	testkit.WaitIdleConns(t)
	endpoint := needEmulator(t, "SPILLWAY_TEST_S3_ENDPOINT")
	key := needEmulator(t, "AWS_ACCESS_KEY_ID")
	secret := needEmulator(t, "AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	bucket := createS3Bucket(t, endpoint)
	p := faultproxy.New(t, endpoint, faultproxy.Options{PreserveHost: true,
		ResignS3: &faultproxy.S3Credentials{AccessKey: key, Secret: secret, Region: "us-east-1"}})
	strip := p.Inject(faultproxy.DropIfNoneMatch())
	runStorageCase(t, storageCase{
		url: "s3://" + bucket + "?endpoint=" + p.URL() + "&use_path_style=true&region=us-east-1",
		want: []string{
			"spillway: storage: s3://" + bucket, "ignores create-only writes",
			"fencing against a paused previous owner of a partition is gone",
			"set storage.conditional_writes: unsafe_ignore",
		},
		secrets: []string{secret},
	})
	if strip.Count() < 2 {
		t.Errorf("the proxy dropped If-None-Match %d times, want at least the probe's two writes", strip.Count())
	}
}
