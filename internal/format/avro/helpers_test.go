package avro

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeFile encodes recs with cfg into dir/name and returns the path.
func writeColumnar(t *testing.T, dir, name string, cfg config.Format, recs []*kgo.Record) string {
	t.Helper()
	var buf bytes.Buffer
	enc, err := Kind().NewEncoder(cfg, &buf)
	if err != nil {
		t.Fatalf("Kind().NewEncoder(%+v): %v", cfg, err)
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatalf("Encode(offset %d): %v", r.Offset, err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
