package storeerr

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestErrorClass(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("commit: %w", ErrExists), "exists"},
		{fmt.Errorf("x: %w", context.Canceled), "canceled"},
		{context.DeadlineExceeded, "timeout"},
		{&FatalError{Kind: KindAccessDenied}, "access_denied"},
		{fmt.Errorf("w: %w", &FatalError{Kind: KindCredentials}), "credentials"},
		{&FatalError{Kind: KindMissingBucket}, "missing_bucket"},
		{errors.New("connection reset"), "other"},
	} {
		if got := ErrorClass(tt.err); got != tt.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	for status, want := range map[int]string{429: "throttled", 503: "throttled", 500: "server_error", 502: "server_error", 0: "network"} {
		if got := RetryClass(status); got != want {
			t.Errorf("RetryClass(%d) = %q, want %q", status, got, want)
		}
	}
}
