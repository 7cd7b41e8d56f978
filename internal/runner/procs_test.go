package runner

import "testing"

func TestGoMaxProcs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url, env string
		procs    int
		cpus     int
		want     int
	}{
		{"file:///data/out", "", 2, 2, 4},
		{"file:///data/out", "", 1, 1, 2},
		{"file:///data/out", "3", 3, 8, 3}, // the user's GOMAXPROCS wins: Go applied it already
		{"file:///data/out", "", 3, 8, 3},  // a CPU quota bounds Go's choice: extra threads would be throttled
		{"file:///data/out", "", 4, 2, 4},  // raised by an earlier run in this process: never again
		{"s3://bucket/prefix", "", 2, 2, 2},
		{"gs://bucket", "", 8, 8, 8},
		{"azblob://container", "", 4, 4, 4},
	} {
		if got := goMaxProcs(c.url, c.env, c.procs, c.cpus); got != c.want {
			t.Errorf("goMaxProcs(%q, GOMAXPROCS=%q, procs %d, cpus %d) = %d, want %d", c.url, c.env, c.procs, c.cpus, got, c.want)
		}
	}
}
