package audit

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flip inverts the bits of d[i].
func flip(d []byte, i int) []byte {
	d[i] ^= 0xff
	return d
}
