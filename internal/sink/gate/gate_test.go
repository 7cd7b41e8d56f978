package gate_test

import (
	"bytes"
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/sink/gate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writer records the pieces it is given and the waits between them.
type writer struct {
	bytes.Buffer
	log []string
}

func (w *writer) Write(p []byte) (int, error) {
	if len(p) > gate.Piece {
		w.log = append(w.log, "too large")
	}
	w.log = append(w.log, "write")
	return w.Buffer.Write(p)
}

func (w *writer) WaitQueued(context.Context, int64) error {
	w.log = append(w.log, "wait")
	return nil
}

type over bool

func (o over) OverLimit() bool { return bool(o) }

func count(log []string, what string) int {
	n := 0
	for _, s := range log {
		if s == what {
			n++
		}
	}
	return n
}

// Over its limit, a bound gate waits for storage before every piece;
// under it, or unbound, or once its context ended, it never waits. Every
// byte goes through, in pieces.
func TestGateWaitsOnlyOverTheLimit(t *testing.T) {
	t.Parallel()
	p := bytes.Repeat([]byte("x"), 2*gate.Piece+1)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name  string
		over  over
		ctx   context.Context
		waits int
	}{
		{"over", true, context.Background(), 3},
		{"under", false, context.Background(), 0},
		{"unbound", true, nil, 0},
		{"ended", true, ended, 0},
	} {
		w := &writer{}
		g := gate.New(w, c.over)
		if c.ctx != nil {
			g.Bind(c.ctx)
		}
		n, err := g.Write(p)
		if err != nil || n != len(p) || !bytes.Equal(w.Bytes(), p) {
			t.Fatalf("%s: wrote %d of %d (%v)", c.name, n, len(p), err)
		}
		if got := count(w.log, "write"); got != 3 || count(w.log, "too large") != 0 {
			t.Errorf("%s: %v, want 3 pieces of at most gate.Piece", c.name, w.log)
		}
		if got := count(w.log, "wait"); got != c.waits {
			t.Errorf("%s: %d waits, want %d", c.name, got, c.waits)
		}
		g.Unbind()
	}
}
