package source

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The dial cut short by kafka.startup_timeout must not hide why the earlier
// dials failed: CI once reported "i/o timeout" for a port that refused.
// The errors are built by hand because the order of real dial outcomes
// (refused, then cut by the deadline) can't be forced on a busy machine.
func TestConnErrsKeepsTheSpecificCause(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	timedOut := &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErrT{}}
	ctxErr := &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}
	cases := []struct {
		name string
		seq  []error
		want error
	}{
		{"refused then timeout", []error{refused, timedOut}, refused},
		{"refused then context", []error{refused, ctxErr}, refused},
		{"timeout only", []error{timedOut, ctxErr}, ctxErr},
		{"timeout then refused", []error{timedOut, refused}, refused},
		{"success clears", []error{refused, nil}, nil},
		{"refused, success, then timeout", []error{refused, nil, timedOut}, timedOut},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ce connErrs
			for _, err := range c.seq {
				ce.OnBrokerConnect(kgo.BrokerMetadata{}, 0, nil, err)
			}
			if got := ce.last(); got != c.want {
				t.Errorf("last() = %v, want %v", got, c.want)
			}
		})
	}
}

type timeoutErrT struct{}

func (timeoutErrT) Error() string   { return "i/o timeout" }
func (timeoutErrT) Timeout() bool   { return true }
func (timeoutErrT) Temporary() bool { return true }
