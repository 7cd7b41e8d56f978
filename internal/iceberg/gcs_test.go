package iceberg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/storage"

	"github.com/spillway/spillway/internal/testkit"
)

// A table whose warehouse is a GCS bucket (fake-gcs-server, a GCS nobody
// here wrote), named as Spillway's storage.url names it: gs://bucket/prefix,
// with the emulator found through STORAGE_EMULATOR_HOST as the GCS client
// finds it.
func TestGCSWarehouse(t *testing.T) {
	t.Parallel()
	testkit.NeedEnv(t, "STORAGE_EMULATOR_HOST")
	ctx := testCtx(t)
	client, err := storage.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var b [5]byte
	_, _ = rand.Read(b[:])
	bucket := "spillway-ice-" + hex.EncodeToString(b[:])
	if err := client.Bucket(bucket).Create(ctx, "spillway-test", nil); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	o := sqlOptions("kafka.events")
	o.Catalog.URI = filepath.Join(t.TempDir(), "catalog.db")
	tb := openTable(t, open(t, o, "gs://"+bucket+"/out"), "kafka.events")
	if want := "gs://" + bucket + "/out/kafka.db/events"; tb.Location() != want {
		t.Fatalf("Location = %q, want %q", tb.Location(), want)
	}
	upload := func(part int32, first, end int64) File {
		local := t.TempDir()
		lf := dataFile(t, "file://"+local, "events", part, first, end, "")
		rel := strings.TrimPrefix(lf.Location, "file://"+local+"/")
		data, err := os.ReadFile(filepath.Join(local, rel))
		if err != nil {
			t.Fatal(err)
		}
		key := "out/kafka.db/events/" + rel
		w := client.Bucket(bucket).Object(key).NewWriter(context.Background())
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		lf.Location = "gs://" + bucket + "/" + key
		return lf
	}
	a := upload(0, 0, 10)
	commit(t, tb, a, upload(1, 0, 20))
	commit(t, tb, a, upload(0, 10, 15))
	next, err := tb.Next(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 15, 1: 20}; !maps.Equal(next, want) {
		t.Fatalf("Next = %v, want %v", next, want)
	}
	if recs, distinct := scanCount(t, tb); recs != 35 || distinct != 35 {
		t.Fatalf("scan: %d records, %d distinct; want 35, 35", recs, distinct)
	}
}
