// Package keycheck is how a component reports what is wrong with its
// options, so that config can list every problem of every section at once
// in one form: the key, the offending value when it is safe to show, and
// the fix. A component's Options.Validate returns an *Error built from a
// List; config gathers them, and `config check` and `run` print them and
// exit 2. It imports nothing of Spillway's, so that a component can use it
// without importing config.
package keycheck

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a config: the key (or environment
// variable, or file:line) it concerns, the offending value when it is safe to
// show, and what to do about it.
type Problem struct {
	Key   string
	Value string // empty when there is nothing to show, or it is secret
	Msg   string
}

// String renders the problem as `key: "value" msg`, or `key: msg` when
// there is no value to show.
func (p Problem) String() string {
	if p.Value != "" {
		return fmt.Sprintf("%s: %q %s", p.Key, p.Value, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.Key, p.Msg)
}

// Error is every problem found in a config. Load and Validate report all
// of them at once, so that a user fixes a config in one pass rather than one
// restart per mistake. Error messages never contain a secret.
type Error struct {
	Problems []Problem
}

// Error renders one problem per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// List collects Problems; its methods keep call sites short.
type List []Problem

// Add appends a problem whose message is msg formatted with args. Pass ""
// as value when the value is secret.
func (l *List) Add(key, value, msg string, args ...any) {
	*l = append(*l, Problem{Key: key, Value: value, Msg: fmt.Sprintf(msg, args...)})
}

// OneOf reports v unless it is one of allowed.
func (l *List) OneOf(key, v string, allowed []string) {
	switch {
	case slices.Contains(allowed, v):
	case v == "":
		l.Add(key, "", "is empty; use %s", OrList(allowed))
	default:
		l.Add(key, v, "is not valid; use %s", OrList(allowed))
	}
}

// Err returns the problems as an *Error, or nil when there are none.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return &Error{Problems: l}
}

// Canon returns the entry of allowed that v names, ignoring case and
// surrounding space, or v as it is when it names none: loading stores
// enumerated values in one case, and leaves a bad one as the user wrote it
// for validation to quote.
func Canon(v string, allowed []string) string {
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimSpace(v), a) {
			return a
		}
	}
	return v
}

// OrList joins xs as "a, b or c", for messages that list the choices.
func OrList(xs []string) string { return joinLast(xs, " or ") }

// AndList joins xs as "a, b and c".
func AndList(xs []string) string { return joinLast(xs, " and ") }

func joinLast(xs []string, last string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + last + xs[len(xs)-1]
}
