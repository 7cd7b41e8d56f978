package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// TestIcebergRecreatedTopicRun: a topic drained into its table through
// `spillway run`, then deleted and recreated in kfake (a new topic id,
// offsets from 0 again) with new records. A second run without
// storage.topic_id_change stops (exit 1), naming the key.
func TestIcebergRecreatedTopicRun(t *testing.T) {
	t.Parallel()
	recreatedTopicRun(t, false)
}

// TestIcebergRecreatedTopicStartFresh: as TestIcebergRecreatedTopicRun,
// then a run with storage.topic_id_change: start_fresh must commit the
// new incarnation's records beside the old one's: every record of both
// once, verify clean.
//
// Known defect, skipped until fixed: the new incarnation's offsets start
// at 0, so its first file's name (kafka.db/events/data/events-1-0.parquet)
// is the old incarnation's, which the table references; create-only
// storage refuses it and the run stops. Plain files stop the same way
// (docs/guarantees.md: move the old files first), but a table's old files
// can't be moved. The names must tell incarnations apart.
func TestIcebergRecreatedTopicStartFresh(t *testing.T) {
	t.Parallel()
	t.Skip("known defect: start_fresh's first file name collides with the old incarnation's in the table's data folder (docs/iceberg.md, Not yet)")
	recreatedTopicRun(t, true)
}

func recreatedTopicRun(t *testing.T, startFresh bool) {
	it := newIceTopic(t, iceSetup{group: "recreated-run"})
	it.produce(0, 500)
	it.drain()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(it.cl)
	if _, err := adm.DeleteTopic(ctx, it.topic); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, it.topic); err != nil {
		t.Fatal(err)
	}
	// A new client: the old one holds the deleted topic's id.
	it.cl = it.cluster.Client(t)
	it.produce(500, 500)

	code, out, errOut := cli(t, nil, "run", "--config", it.cfgPath)
	wantCode(t, code, exitRuntime, out, errOut)
	wantContains(t, "run's stderr", errOut, "storage.topic_id_change: start_fresh")
	if !startFresh {
		return
	}

	yaml, err := os.ReadFile(it.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	fresh := strings.Replace(string(yaml), "storage: {", "storage: {topic_id_change: start_fresh, ", 1)
	if err := os.WriteFile(it.cfgPath, []byte(fresh), 0o600); err != nil {
		t.Fatal(err)
	}
	if it.cfg, err = config.Load(it.cfgPath, nil); err != nil {
		t.Fatal(err)
	}
	it.drain()

	r := it.readIndependently(outside.NewDuckDB(t), it.topic)
	wantEachOnce(t, r.values, 1_000)
	code, out, errOut = verifyCLI(t, it.dir, "--config", it.cfgPath)
	wantCode(t, code, exitOK, out, errOut)
}
