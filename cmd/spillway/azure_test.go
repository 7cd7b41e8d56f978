package main

// Azure as the README documents it: AZURE_STORAGE_CONNECTION_STRING alone,
// Azurite's own connection string with its http BlobEndpoint, and
// storage.url azblob://container. No other AZURE_* variable is set.

import (
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/testkit"
)

// azureOnlyConnEnv is the child's environment with no AZURE_* variable but
// the connection string.
func azureOnlyConnEnv(conn string) []string {
	var env []string
	for _, kv := range childEnv() {
		if !strings.HasPrefix(kv, "AZURE_") {
			env = append(env, kv)
		}
	}
	return append(env, "AZURE_STORAGE_CONNECTION_STRING="+conn)
}

// createAzureContainer makes a fresh container on Azurite: gocloud never
// creates one.
func createAzureContainer(t *testing.T, conn, prefix string) (*container.Client, string) {
	t.Helper()
	name := randomName(t, prefix)
	cc, err := container.NewClientFromConnectionString(conn, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cc.Create(ctx, nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	return cc, name
}

// downloadContainer copies every blob of the container into a directory,
// through the SDK directly rather than Spillway's storage package.
func downloadContainer(t *testing.T, cc *container.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pager := cc.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list blobs: %v", err)
		}
		for _, it := range page.Segment.BlobItems {
			if strings.HasPrefix(*it.Name, ledger.StateDir) {
				continue // Spillway's own state, not a data file
			}
			resp, err := cc.NewBlobClient(*it.Name).DownloadStream(ctx, nil)
			if err != nil {
				t.Fatalf("download %s: %v", *it.Name, err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("download %s: %v", *it.Name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(*it.Name)), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// TestBinaryRunAzureConnectionString drains a topic into Azurite with the
// connection string as the only Azure setting, stops cleanly, and checks
// with `spillway verify` and with the SDK that every record is stored once.
// Spillway once refused it at startup with the SDK's `protocol "http" only
// allowed when IsLocalEmulator is true`.
func TestBinaryRunAzureConnectionString(t *testing.T) {
	spillwayBinary(t)
	conn := needEmulator(t, "SPILLWAY_TEST_AZURE_CONNECTION_STRING")
	testkit.WaitIdleConns(t)
	cc, name := createAzureContainer(t, conn, "spillway-conn-")
	cluster := testkit.NewCluster(t, partitions, testTopic)
	cl := cluster.Client(t)
	produceBatch(t, cl, 0, 4_000)
	end := testkit.EndOffsets(t, cl, testTopic)
	const group = "spillway-azure-conn"
	// File sizes don't matter here (the budget may close a file early):
	// a short max_age stores each partition's last records.
	cfg := writeFile(t, "spillway.yaml", `kafka:
  brokers: ["`+cluster.Addrs()[0]+`"]
  topics: [events]
  group: `+group+`
storage:
  url: azblob://`+name+`
file:
  max_records: 250
  max_age: 1s
admin:
  listen: ""
backpressure:
  memory_limit: 256MiB
`)
	env := azureOnlyConnEnv(conn)
	p := startSpillwayEnv(t, env, "run", "--config", cfg)
	waitUntil(t, p, "every record to be committed", func() bool {
		return maps.Equal(testkit.CommittedOffsets(t, cl, group, testTopic), end)
	})
	if code, _ := p.stop(t, syscall.SIGTERM, 20*time.Second+exitGrace); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\nstderr:\n%s", code, p.stderr.String())
	}

	code, out, errOut := runToExitEnv(t, env, "verify", "--config", cfg)
	if code != exitOK || !strings.Contains(out, "storage is consistent with Kafka") {
		t.Errorf("spillway verify: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	recs := testkit.ReadJSONL(t, downloadContainer(t, cc))
	testkit.AssertExactlyOnce(t, recs, testTopic, end)
}
