package runner

import "testing"

func TestGoMaxProcs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url, env string
		procs    int
		want     int
	}{
		{"file:///data/out", "", 2, 4},
		{"file:///data/out", "", 1, 2},
		{"file:///data/out", "3", 2, 2}, // the user's GOMAXPROCS wins: Go applied it already
		{"s3://bucket/prefix", "", 2, 2},
		{"gs://bucket", "", 8, 8},
		{"azblob://container", "", 4, 4},
	} {
		if got := goMaxProcs(c.url, c.env, c.procs); got != c.want {
			t.Errorf("goMaxProcs(%q, GOMAXPROCS=%q, %d) = %d, want %d", c.url, c.env, c.procs, got, c.want)
		}
	}
}
