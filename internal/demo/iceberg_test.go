package demo

import (
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestIcebergConfig: the config `spillway demo --iceberg` runs with is
// valid, and is what `config check` prints and `run` loads back: the
// table's layout under the output directory, the SQLite catalog beside
// it. The hint names both.
func TestIcebergConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Kafka.Topics = []string{topic}
	cfg.Storage.URL = "file://" + dir
	cfg.Admin.Listen = ""
	useIceberg(cfg, dir)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the demo's iceberg config is invalid: %v", err)
	}
	if want := "demo.db/{{topic:dots=_}}/data/timestamp_day={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/{{topic}}-{{partition}}-{{start_offset}}"; cfg.File.NameTemplate != want {
		t.Errorf("file.name_template %s, want %s", cfg.File.NameTemplate, want)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.LoadBytes(out, nil)
	if err != nil {
		t.Fatalf("config check's output does not load:\n%s\n%v", out, err)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("config check shows another config than the demo runs:\n got %+v\nwant %+v", back, cfg)
	}
	hint := icebergHint(cfg)
	for _, want := range []string{dir + "/catalog.db", "file://" + dir + "/demo.db/demo-events", dir + "/demo.db/demo-events/data/**/*.parquet", "iceberg_tables"} {
		if !strings.Contains(hint, want) {
			t.Errorf("the hint does not name %s:\n%s", want, hint)
		}
	}
}
