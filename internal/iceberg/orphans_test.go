package iceberg

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// countingCatalog is the real SQL catalog, counting its table loads: no
// engine reports how often it was asked, and the count is what the test
// is about.
type countingCatalog struct {
	catalog.Catalog
	loads *atomic.Int64
}

func (c countingCatalog) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	c.loads.Add(1)
	return c.Catalog.LoadTable(ctx, id)
}

// TestOrphanFilesOneLoad stats and removes three orphans of a table
// through Files: the table is loaded once, by Catalog.Table, not per
// file (it was twice per orphan).
func TestOrphanFilesOneLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := open(t, sqlOptions("kafka.events"), dir)
	tb := openTable(t, c, "kafka.events")
	commit(t, tb, dataFile(t, tb.Location(), "events", 0, 0, 10, ""))
	var orphans []string
	for i := range int64(3) {
		orphans = append(orphans, dataFile(t, tb.Location(), "events", 1, i, i+1, "-orphan").Location)
	}
	var loads atomic.Int64
	c.cat = countingCatalog{Catalog: c.cat, loads: &loads}
	ctx := testCtx(t)
	tb = openTable(t, c, "kafka.events")
	files, err := tb.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range orphans {
		fi, err := files.Stat(loc)
		if err != nil || fi.Bytes == 0 {
			t.Fatalf("Stat %s: %+v, %v", loc, fi, err)
		}
		if err := files.Remove(loc); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(strings.TrimPrefix(loc, "file://")); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", loc, err)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("the table was loaded %d times for 3 orphans, want once", n)
	}
}
