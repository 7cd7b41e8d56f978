// Package keychecktest checks what a config section's Validate returns,
// for the tests of the packages that own a section (admin, registry). It
// is for tests only: nothing outside a _test.go file imports it.
package keychecktest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/keycheck"
)

// Problems checks that err, from a Validate, is nil when want is nil and
// otherwise a *keycheck.Error whose problems read want, in order; and that
// it never shows secret, which is what secretName names in the message.
func Problems(t *testing.T, err error, want []string, secret, secretName string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		return
	}
	var ke *keycheck.Error
	if !errors.As(err, &ke) {
		t.Fatalf("Validate = %v (%T), want a *keycheck.Error", err, err)
	}
	var got []string
	for _, p := range ke.Problems {
		got = append(got, p.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error shows the %s: %v", secretName, err)
	}
}
