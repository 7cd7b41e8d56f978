package main

import (
	"strings"
	"testing"
)

// config check warns, without failing, when the storage settings can't fit
// in backpressure.memory_limit, and says what to change.
func TestConfigCheckWarnsWhenStorageCantFitTheMemoryLimit(t *testing.T) {
	t.Parallel()
	const config = `kafka:
  brokers: ["127.0.0.1:9092"]
  topics: [events]
storage:
  url: %s
backpressure:
  memory_limit: 64MiB
`
	// S3 with the default 8MiB parts: one open file holds five of them,
	// more than the whole data budget of a 64MiB limit.
	path := writeFile(t, "s3.yaml", strings.Replace(config, "%s", "'s3://bucket?region=us-east-1'", 1))
	code, out, errOut := cli(t, nil, "config", "check", path)
	wantCode(t, code, exitOK, out, errOut)
	wantContains(t, "stdout", out, "memory_limit: 64MiB")
	wantContains(t, "stderr", errOut, "spillway: warning: backpressure.memory_limit 64MiB", "storage.part_size",
		"storage.upload_concurrency", "set backpressure.memory_limit to at least")
	if n := strings.Count(errOut, "\n"); n != 1 {
		t.Errorf("stderr holds %d lines, want the one warning:\n%s", n, errOut)
	}

	// A local directory needs no parts: no warning.
	path = writeFile(t, "file.yaml", strings.Replace(config, "%s", "file:///var/lib/spillway/out", 1))
	code, out, errOut = cli(t, nil, "config", "check", path)
	wantCode(t, code, exitOK, out, errOut)
	if errOut != "" {
		t.Errorf("stderr = %q, want nothing", errOut)
	}
}
