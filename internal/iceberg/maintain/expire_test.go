package maintain

import (
	"strings"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/keycheck"
)

// TestExpireOptionsValidate: a negative age or keep_last below 1 exits
// 2 naming the key, the value and the fix; off, nothing is checked.
func TestExpireOptionsValidate(t *testing.T) {
	t.Parallel()
	validate := func(e ExpireOptions) error {
		var ps keycheck.List
		e.Validate(&ps)
		return ps.Err()
	}
	e := ExpireOptions{Enabled: true, MaxAge: -time.Hour, KeepLast: 0}
	err := validate(e)
	if err == nil {
		t.Fatal("Validate accepted max_age -1h and keep_last 0")
	}
	for _, want := range []string{"iceberg.expire_snapshots.max_age", "-1h0m0s", "must not be negative", "iceberg.expire_snapshots.keep_last", "must be at least 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	e.Enabled = false
	if err := validate(e); err != nil {
		t.Errorf("expiry off: %v", err)
	}
	if d := DefaultExpire(); d != (ExpireOptions{Enabled: true, MaxAge: 120 * time.Hour, KeepLast: 1}) {
		t.Errorf("defaults %+v, want Iceberg's: on, 5 days, 1", d)
	}
}
