package config

import (
	"errors"

	"github.com/spillway/spillway/internal/keycheck"
)

// Problem is one thing wrong with a config: the key (or environment
// variable, or file:line) it concerns, the offending value when it is safe to
// show, and what to do about it. It is keycheck's, so that the sections
// that components validate themselves report in the same form.
type Problem = keycheck.Problem

// Error is every problem found in a config. Load and Validate report all
// of them at once, so that a user fixes a config in one pass rather than one
// restart per mistake. Error messages never contain a secret.
type Error = keycheck.Error

// problems collects Problems; its methods keep call sites short.
type problems []Problem

func (ps *problems) add(key, value, msg string, args ...any) {
	(*keycheck.List)(ps).Add(key, value, msg, args...)
}

func (ps problems) err() error { return keycheck.List(ps).Err() }

// absorb appends the problems a section's own Validate found. An error
// that is not a *keycheck.Error would be a component's bug; it is still
// reported, under the section's name, rather than lost.
func (ps *problems) absorb(section string, err error) {
	if err == nil {
		return
	}
	var e *Error
	if errors.As(err, &e) {
		*ps = append(*ps, e.Problems...)
		return
	}
	ps.add(section, "", "%v", err)
}
