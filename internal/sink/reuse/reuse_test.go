package reuse_test

import (
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/sink/reuse"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// enc and comp are parts of a chain that record their resets.
type enc struct {
	w        io.Writer
	resetErr error
}

func (e *enc) Encode(*kgo.Record) error { return nil }
func (e *enc) Close() error             { return nil }
func (e *enc) Reset(w io.Writer) error  { e.w = w; return e.resetErr }

type comp struct{ w io.Writer }

func (c *comp) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *comp) Close() error                { return nil }
func (c *comp) Reset(w io.Writer)           { c.w = w }

// plain can't be reset.
type plain struct{}

func (plain) Encode(*kgo.Record) error { return nil }
func (plain) Close() error             { return nil }

const mem = 1000

func encoders(b *budget.Budget) int64 {
	for _, hb := range b.Snapshot().By {
		if hb.Holder == budget.FileEncoders {
			return hb.Bytes
		}
	}
	return 0
}

// A kept chain stays charged until a file takes it, reset onto the
// file's writer; at most reuse.Idle wait, and Drop lets them go.
func TestKeepTakeDrop(t *testing.T) {
	t.Parallel()
	b := budget.New(1<<30, 0)
	c := reuse.New(b, mem)
	if _, _, ok := c.Take(io.Discard); ok {
		t.Fatal("took a chain from an empty pool")
	}
	e, z := &enc{}, &comp{}
	c.Keep(e, z)
	if got := encoders(b); got != mem {
		t.Fatalf("a kept chain charges %d, want %d", got, mem)
	}
	var w struct{ io.Writer }
	ge, gz, ok := c.Take(&w)
	if !ok || ge != e || gz != z || z.w != &w || e.w != z {
		t.Fatalf("took %v %v %v, want the kept chain reset onto the new writer", ge, gz, ok)
	}
	if got := encoders(b); got != 0 {
		t.Fatalf("a taken chain still charges %d", got)
	}
	for range reuse.Idle + 2 {
		c.Keep(&enc{}, &comp{})
	}
	if got := encoders(b); got != reuse.Idle*mem {
		t.Fatalf("%d charged, want %d idle chains", got, reuse.Idle)
	}
	c.Drop()
	if got := encoders(b); got != 0 {
		t.Fatalf("%d charged after Drop", got)
	}
}

// A chain that can't be reset is not kept, and one whose reset fails is
// not handed out.
func TestUnresettable(t *testing.T) {
	t.Parallel()
	b := budget.New(1<<30, 0)
	c := reuse.New(b, mem)
	c.Keep(plain{}, &comp{})
	if got := encoders(b); got != 0 {
		t.Fatalf("an encoder without Reset was kept (%d charged)", got)
	}
	c.Keep(&enc{resetErr: errors.New("header failed")}, &comp{})
	if _, _, ok := c.Take(io.Discard); ok {
		t.Fatal("a chain whose reset failed was handed out")
	}
	if got := encoders(b); got != 0 {
		t.Fatalf("%d charged after the failed chain was dropped", got)
	}
}
