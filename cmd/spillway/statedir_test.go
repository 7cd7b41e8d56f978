package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/testkit"
)

// TestRunRefusesRegexTopicInStateDir: kafka.topic_regex matches a topic
// named like the ledger's folder, and the template would write its files
// into that folder. `config check` can't know the topic; `run` refuses it
// when it is assigned, before anything of it is read or written, with the
// config contract's exit 2 and a message naming the topic, the template
// and the fix.
func TestRunRefusesRegexTopicInStateDir(t *testing.T) {
	keepGoMemLimit(t)
	cluster := testkit.NewCluster(t, 1, "_spillway")
	testkit.Produce(t, cluster.Client(t), "_spillway", 10, func(i int) *kgo.Record {
		return &kgo.Record{Value: fmt.Appendf(nil, `{"i":%d}`, i)}
	})
	out := t.TempDir()
	path := writeFile(t, "spillway.yaml", fmt.Sprintf(`kafka:
  brokers: [%q]
  topic_regex: "^_spill"
storage:
  url: file://%s
file:
  name_template: "{{topic}}/{{partition}}-{{start_offset}}"
  max_records: 1
admin:
  listen: ""
backpressure:
  memory_limit: 1GiB
`, cluster.Addrs()[0], out))
	code, stdout, stderr := cli(t, nil, "config", "check", path)
	wantCode(t, code, exitOK, stdout, stderr)

	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	var errb bytes.Buffer
	code = runContext(ctx, []string{"run", "--config", path}, &bytes.Buffer{}, &errb, nil)
	if ctx.Err() != nil {
		t.Fatalf("run did not stop by itself within %v\n%s", waitDeadline, errb.String())
	}
	wantCode(t, code, exitUsage, "", errb.String())
	wantContains(t, "run stderr", errb.String(),
		`spillway: kafka.topic_regex: "^_spill" matches topic "_spillway", whose files file.name_template "{{topic}}/{{partition}}-{{start_offset}}" would write into "_spillway/" under storage.prefix`,
		`such as file.name_template: "topics/{{topic}}/{{partition}}-{{start_offset}}", or leave the topic out of kafka.topic_regex`)
	// The startup probe passes through _spillway/ and is deleted; no file
	// may be left anywhere.
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("%s is stored, want nothing: nothing of the topic may be written", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
