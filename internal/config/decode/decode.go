// Package decode turns the raw values that YAML and the environment give
// (strings, numbers, booleans, lists, nil) into the Go type of the key they
// set, or into a Problem that names the key, the value when it may be shown,
// and what the key takes. It knows kinds of values, not Spillway's keys:
// config's key table says which key is of which kind, so that the same rules
// and messages hold for every key.
package decode

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/bytesize"
	"github.com/spillway/spillway/internal/keycheck"
)

// Kind is how a key's value is written in YAML and the environment.
type Kind int

// The kinds of values a key can take.
const (
	String Kind = iota
	List        // comma-separated in the environment
	Bool
	Int
	Size
	Duration
)

// Key is what Value needs to know of the key a value sets.
type Key struct {
	Name   string // the dotted key, for examples in messages
	Kind   Kind
	Secret bool // the value is never shown in a Problem
}

// Problem is keycheck's, the form every config problem takes.
type Problem = keycheck.Problem

// Value turns v, from YAML or the environment, into the Go type of k
// (string, []string, bool, int64, bytesize.Size, time.Duration), or
// explains under the name where (a key or a variable) why it can't. Strings
// are accepted wherever a number or boolean is expected, because that is
// all the environment has.
func Value(k Key, where string, v any) (any, *Problem) {
	c := conv{k: k, where: where, v: v}
	if str, ok := v.(string); ok && strings.TrimSpace(str) == "" && k.Kind != String && k.Kind != List {
		return nil, &Problem{Key: where, Msg: "is empty; expected " + Expect(k)}
	}
	switch k.Kind {
	case String:
		return c.str()
	case List:
		return c.list()
	case Bool:
		return c.bool()
	case Int:
		return c.int()
	case Size:
		return c.size()
	case Duration:
		return c.duration()
	}
	panic("decode: unhandled kind") // config's key table only makes the kinds above
}

// conv is one value being converted, with what its messages need.
type conv struct {
	k     Key
	where string
	v     any
}

// bad is a problem with the value itself, shown unless it is secret.
func (c conv) bad(msg string) *Problem {
	p := &Problem{Key: c.where, Msg: msg}
	if !c.k.Secret {
		p.Value = fmt.Sprint(c.v)
	}
	return p
}

// wrongType is a problem with the type of the value: a scalar is shown
// (unless secret), a list or section is only named.
func (c conv) wrongType() *Problem {
	if IsScalar(c.v) {
		return c.bad(fmt.Sprintf("is %s; expected %s", Describe(c.v), Expect(c.k)))
	}
	return &Problem{Key: c.where, Msg: fmt.Sprintf("expected %s, not %s", Expect(c.k), Describe(c.v))}
}

func (c conv) str() (any, *Problem) {
	switch v := c.v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	if IsScalar(c.v) { // a number where a string is expected, like a password of digits
		return fmt.Sprint(c.v), nil
	}
	return nil, c.wrongType()
}

func (c conv) list() (any, *Problem) {
	if c.v == nil {
		return []string(nil), nil
	}
	items, ok := c.v.([]any)
	if !ok {
		return nil, c.wrongType()
	}
	var out []string // nil when empty, so that loaded and built configs compare equal
	for i, it := range items {
		if it == nil || !IsScalar(it) {
			return nil, &Problem{Key: c.where, Msg: fmt.Sprintf("item %d is %s; expected a list of strings such as %s", i+1, Describe(it), listExample(c.k.Name))}
		}
		out = append(out, fmt.Sprint(it))
	}
	return out, nil
}

func (c conv) bool() (any, *Problem) {
	switch v := c.v.(type) {
	case bool:
		return v, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b, nil
		}
		return nil, c.bad("is not valid; use true or false")
	}
	return nil, c.wrongType()
}

func (c conv) int() (any, *Problem) {
	if n, ok := toInt64(c.v); ok {
		return n, nil
	}
	if c.v == nil || !IsScalar(c.v) {
		return nil, c.wrongType()
	}
	return nil, c.bad("is not a whole number")
}

func (c conv) size() (any, *Problem) {
	if str, ok := c.v.(string); ok {
		n, err := bytesize.Parse(str)
		var se *bytesize.Error
		if errors.As(err, &se) {
			return nil, c.bad("is not a size; " + se.Hint)
		}
		return n, nil
	}
	if n, ok := toInt64(c.v); ok {
		if n < 0 {
			return nil, c.bad("is not a size; sizes can't be negative")
		}
		return bytesize.Size(n), nil
	}
	if c.v == nil || !IsScalar(c.v) {
		return nil, c.wrongType()
	}
	return nil, c.bad("is not a size; " + bytesize.Hint)
}

func (c conv) duration() (any, *Problem) {
	if c.v == nil || !IsScalar(c.v) {
		return nil, c.wrongType()
	}
	// A bare number such as 300 fails here with "missing unit", which
	// is the point: seconds or milliseconds would be a guess.
	d, err := time.ParseDuration(strings.TrimSpace(fmt.Sprint(c.v)))
	if err != nil {
		return nil, c.bad("is not a duration; use Go syntax such as 5m, 30s or 1h30m")
	}
	return d, nil
}

// EnvList splits a variable's value into a list's items: comma-separated,
// with spaces around items and empty items (from a trailing comma)
// dropped.
func EnvList(value string) []any {
	var items []any
	for item := range strings.SplitSeq(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// toInt64 accepts the integer forms YAML and the environment produce.
func toInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int:
		return int64(v), true
	case int64:
		return v, true
	case uint64:
		return int64(v), v <= math.MaxInt64
	case float64: // YAML reads 1e6 as a float
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return int64(v), true
		}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// IsScalar says whether v is a single value, not a list or a section.
func IsScalar(v any) bool {
	switch v.(type) {
	case string, bool, int, int64, uint64, float64:
		return true
	}
	return false
}

// Describe names the YAML type of v for messages.
func Describe(v any) string {
	switch v.(type) {
	case nil:
		return "empty"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a section (a mapping of keys)"
	}
	return fmt.Sprintf("a %T", v)
}

// Expect names what key k takes, with an example.
func Expect(k Key) string {
	switch k.Kind {
	case List:
		return "a list such as " + listExample(k.Name)
	case Bool:
		return "true or false"
	case Int:
		return "a whole number"
	case Size:
		return "a size such as 64MiB"
	case Duration:
		return "a duration such as 5m or 30s"
	}
	return "a string"
}

func listExample(key string) string {
	switch key {
	case "kafka.brokers":
		return `["127.0.0.1:9092"]`
	case "kafka.topics":
		return `["events"]`
	case "format.fields":
		return "[key, value, offset, timestamp, headers]"
	}
	return "[a, b]"
}
