package config

import (
	"fmt"
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

// problems collects Problems; its methods keep call sites short.
type problems []Problem

func (ps *problems) add(key, value, msg string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Value: value, Msg: fmt.Sprintf(msg, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &Error{Problems: ps}
}
