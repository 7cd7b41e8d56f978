package remote

import (
	"testing"
	"time"
)

// TestRetryBackoff: waits grow exponentially from InitialBackoff, are capped
// by MaxBackoff, are jittered within [0, cap], and sum to the documented
// bound.
func TestRetryBackoff(t *testing.T) {
	r := Retry{}.withDefaults()
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second}
	for i, w := range want {
		if got := r.ceiling(i + 1); got != w {
			t.Errorf("ceiling(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got, want := r.Budget(), 75500*time.Millisecond; got != want {
		t.Errorf("Budget() = %v, want %v", got, want)
	}
	distinct := map[time.Duration]bool{}
	for range 200 {
		d := r.delay(3)
		if d < 0 || d > 2*time.Second {
			t.Fatalf("delay(3) = %v, want within [0, 2s]", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 50 {
		t.Errorf("delay(3) took only %d distinct values in 200 draws: no jitter", len(distinct))
	}
	small := Retry{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 15 * time.Millisecond}.withDefaults()
	if got, want := small.Budget(), 25*time.Millisecond; got != want {
		t.Errorf("small Budget() = %v, want %v", got, want)
	}
}
