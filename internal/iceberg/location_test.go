package iceberg

import "testing"

// TestIOLocation: only what Spillway wrote below the table's location is
// escaped for iceberg-go's LocalFS; the location's own base is already a
// URL (a warehouse in "/tmp/my lake#1" is file:///tmp/my%20lake%231), and
// escaping it again opened another path: every commit of a table in such a
// directory failed (found by BenchmarkIcebergDrain, whose temporary
// directory has a '#').
func TestIOLocation(t *testing.T) {
	base := "file:///tmp/my%20lake%231/kafka.db/t"
	for _, tt := range []struct{ loc, want string }{
		{base + "/data/country=%C3%96sterreich/t-0-1.parquet", base + "/data/country=%25C3%2596sterreich/t-0-1.parquet"},
		{base + "/data/k=a?b#c/t-0-1.parquet", base + "/data/k=a%3Fb%23c/t-0-1.parquet"},
		{base + "/data/t-0-1.parquet", base + "/data/t-0-1.parquet"},
		// Outside the table's location: as iceberg-go takes it.
		{"file:///elsewhere/x%20y.parquet", "file:///elsewhere/x%20y.parquet"},
		// Object stores keep keys raw in iceberg-go's FileIO.
		{"s3://b/kafka.db/t/data/country=%C3%96/x.parquet", "s3://b/kafka.db/t/data/country=%C3%96/x.parquet"},
	} {
		if got := ioLocation(base, tt.loc); got != tt.want {
			t.Errorf("ioLocation(%q)\n = %q\nwant %q", tt.loc, got, tt.want)
		}
	}
	if got := ioLocation(base+"/", base+"/data/a%b"); got != base+"/data/a%25b" {
		t.Errorf("a base with a trailing /: %q", got)
	}
}
