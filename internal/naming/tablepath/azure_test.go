package tablepath

import "testing"

// TestAzureBase: an azblob:// container is named as Iceberg names
// it, abfs://container@account.dfs.core.windows.net, its gocloud query
// left out; LocationUnder then takes an abfs:// location in that
// container relative to it, and refuses another container's.
func TestAzureBase(t *testing.T) {
	t.Parallel()
	base, ok, err := AzureBase("azblob://cont?protocol=http", "acct")
	if err != nil || !ok || base != "abfs://cont@acct.dfs.core.windows.net" {
		t.Fatalf("AzureBase = %q, %v, %v", base, ok, err)
	}
	if _, ok, _ := AzureBase("s3://b", "acct"); ok {
		t.Fatal("s3:// taken as Azure")
	}
	if _, _, err := AzureBase("azblob://cont", ""); err == nil {
		t.Fatal("no error without an account")
	}
	rel, err := LocationUnder(base, "out/", base+"/out/kafka.db/events")
	if err != nil || rel != "kafka.db/events" {
		t.Fatalf("LocationUnder = %q, %v", rel, err)
	}
	if _, err := LocationUnder(base, "out/", "abfs://other@acct.dfs.core.windows.net/out/kafka.db/events"); err == nil {
		t.Fatal("another container's location accepted")
	}
}
