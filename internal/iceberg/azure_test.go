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

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/spillway/spillway/internal/testkit"
)

// A table whose warehouse is an Azure container (Azurite, an Azure
// nobody here wrote), named as Iceberg names Azure locations:
// abfs://container@account.dfs.core.windows.net/prefix, reached through
// iceberg-go's Azure FileIO with the adls.connection-string.<account>
// property. The catalog's SQLite file is local. Commit, skip a duplicate,
// read back.
func TestAzureWarehouse(t *testing.T) {
	t.Parallel()
	conn := testkit.NeedEnv(t, "SPILLWAY_TEST_AZURE_CONNECTION_STRING")
	account := testkit.AzureConnField(conn, "AccountName")
	ctx := testCtx(t)
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "spillway-ice-" + hex.EncodeToString(b[:])
	cc, err := container.NewClientFromConnectionString(conn, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Create(ctx, nil); err != nil {
		t.Fatalf("create container: %v", err)
	}

	o := sqlOptions("kafka.events")
	o.Catalog.URI = filepath.Join(t.TempDir(), "catalog.db")
	o.Catalog.Properties = []string{"adls.connection-string." + account + "=" + conn}
	wh := "abfs://" + name + "@" + account + ".dfs.core.windows.net/out"
	c := open(t, o, wh)
	tb := openTable(t, c, "kafka.events")
	loc := tb.Location()
	if want := wh + "/kafka.db/events"; loc != want {
		t.Fatalf("Location = %q, want %q", loc, want)
	}
	upload := func(f File) File {
		local := t.TempDir()
		lf := dataFile(t, "file://"+local, f.Topic, f.Partition, f.First, f.End, "")
		rel := lf.Location[len("file://"+local)+1:]
		data, err := os.ReadFile(filepath.Join(local, rel))
		if err != nil {
			t.Fatal(err)
		}
		key := "out/kafka.db/events/" + rel
		if _, err := cc.NewBlockBlobClient(key).UploadBuffer(context.Background(), data, nil); err != nil {
			t.Fatalf("upload %s: %v", key, err)
		}
		lf.Location = loc + "/" + rel
		return lf
	}
	a := upload(File{Topic: "events", Partition: 0, First: 0, End: 10})
	b2 := upload(File{Topic: "events", Partition: 1, First: 0, End: 20})
	commit(t, tb, a, b2)
	commit(t, tb, a, upload(File{Topic: "events", Partition: 0, First: 10, End: 15}))

	tb2 := openTable(t, open(t, o, wh), "kafka.events")
	next, err := tb2.Next(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 15, 1: 20}; !maps.Equal(next, want) {
		t.Fatalf("Next = %v, want %v", next, want)
	}
	if n := len(dataFiles(t, tb2)); n != 3 {
		t.Fatalf("data files = %d, want 3", n)
	}
	if recs, distinct := scanCount(t, tb2); recs != 35 || distinct != 35 {
		t.Fatalf("scan: %d records, %d distinct; want 35, 35", recs, distinct)
	}
	// The metadata went to the container too.
	pager := cc.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: new("out/kafka.db/events/metadata/")})
	found := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Segment.BlobItems {
			if strings.HasSuffix(*it.Name, ".metadata.json") {
				found++
			}
		}
	}
	if found == 0 {
		t.Fatal("no metadata file in the container")
	}
}
