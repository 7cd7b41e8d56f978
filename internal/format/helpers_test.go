package format

import (
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/format/formattest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// encodeAll encodes recs with this package's encoders and closes the
// encoder, failing on any error.
func encodeAll(t *testing.T, cfg Options, recs ...*kgo.Record) string {
	t.Helper()
	encode := func(c Options, w io.Writer) (formattest.Encoder, error) { return newEncoder(c, w) }
	return formattest.EncodeAll(t, encode, cfg, recs...)
}

// newEncoder is formats.NewEncoder for the formats of this package, which
// its tests cover (package formats imports this one, so its table can't be
// used here).
func newEncoder(cfg Options, w io.Writer) (Encoder, error) {
	for _, k := range []Kind{CSV(), Bytes()} {
		if k.Name == cfg.Type {
			return k.NewEncoder(cfg, w)
		}
	}
	return nil, fmt.Errorf("format.type %q is not a format of package format", cfg.Type)
}

// failWriter fails every write with err, and counts them.
type failWriter struct {
	err    error
	writes int
}

func (w *failWriter) Write(p []byte) (int, error) { w.writes++; return 0, w.err }
