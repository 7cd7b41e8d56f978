package restore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
)

// TestRoundTripGCS stores through fake-gcs-server, the GCS emulator, and
// restores from it: the same storage code the sink and restore use in
// production, over HTTP.
func TestRoundTripGCS(t *testing.T) {
	t.Parallel()
	host := testkit.NeedEnv(t, "STORAGE_EMULATOR_HOST")
	testkit.WaitIdleConns(t)
	var rb [5]byte
	_, _ = rand.Read(rb[:])
	bucket := "restore-" + hex.EncodeToString(rb[:])
	// The emulator's JSON API creates buckets; gocloud.dev does not.
	resp, err := http.Post("http://"+host+"/storage/v1/b?project=spillway-test", "application/json", bytes.NewReader([]byte(`{"name":"`+bucket+`"}`)))
	if err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create bucket %s: %s", bucket, resp.Status)
	}
	cluster := testkit.NewCluster(t, 1)
	f := newSource(t, cluster, "src-gcs", 2, 194, func(c *config.Config) {
		c.Format.Type, c.Format.Compression = "jsonl", "zstd"
		c.Storage.URL = "gs://" + bucket
	})
	createTopic(t, f.cl, "dst-gcs", 2)
	if _, err := f.restoreTo(t, "dst-gcs", Options{TxnBytes: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	compare(t, f.want, readCommitted(t, cluster, "dst-gcs", 2))
}
