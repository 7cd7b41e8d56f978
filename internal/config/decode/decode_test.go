package decode

import (
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/bytesize"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestValue: each kind takes YAML's own type and the environment's
// string, and a refused value names where it came from, and shows the
// value only when the key is not secret.
func TestValue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		k       Key
		in      any
		want    any
		problem string // the Problem's String, "" for none
	}{
		{Key{Name: "a.s", Kind: String}, 1234, "1234", ""},
		{Key{Name: "a.s", Kind: String}, nil, "", ""},
		{Key{Name: "a.s", Kind: String}, []any{"x"}, nil, "w: expected a string, not a list"},
		{Key{Name: "kafka.topics", Kind: List}, []any{"a", 2}, []string{"a", "2"}, ""},
		{Key{Name: "kafka.topics", Kind: List}, "a", nil, `w: "a" is a string; expected a list such as ["events"]`},
		{Key{Name: "kafka.topics", Kind: List}, []any{nil}, nil, `w: item 1 is empty; expected a list of strings such as ["events"]`},
		{Key{Name: "a.b", Kind: Bool}, " true", true, ""},
		{Key{Name: "a.b", Kind: Bool}, "yes", nil, `w: "yes" is not valid; use true or false`},
		{Key{Name: "a.i", Kind: Int}, 1e6, int64(1000000), ""},
		{Key{Name: "a.i", Kind: Int}, "1.5", nil, `w: "1.5" is not a whole number`},
		{Key{Name: "a.i", Kind: Int}, " ", nil, "w: is empty; expected a whole number"},
		{Key{Name: "a.z", Kind: Size}, "64MiB", 64 * bytesize.MiB, ""},
		{Key{Name: "a.z", Kind: Size}, -1, nil, `w: "-1" is not a size; sizes can't be negative`},
		{Key{Name: "a.d", Kind: Duration}, "1h30m", 90 * time.Minute, ""},
		{Key{Name: "a.d", Kind: Duration}, 300, nil, `w: "300" is not a duration; use Go syntax such as 5m, 30s or 1h30m`},
		{Key{Name: "a.p", Kind: Bool, Secret: true}, "hunter2", nil, "w: is not valid; use true or false"},
	} {
		got, p := Value(tt.k, "w", tt.in)
		switch {
		case tt.problem == "" && p != nil:
			t.Errorf("Value(%s, %#v): %s", tt.k.Name, tt.in, p)
		case tt.problem != "" && (p == nil || p.String() != tt.problem):
			t.Errorf("Value(%s, %#v) = problem %v, want %s", tt.k.Name, tt.in, p, tt.problem)
		case tt.problem == "" && !equal(got, tt.want):
			t.Errorf("Value(%s, %#v) = %#v, want %#v", tt.k.Name, tt.in, got, tt.want)
		}
	}
}

func equal(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs, ok := b.([]string)
		if !ok || len(as) != len(bs) {
			return false
		}
		for i := range as {
			if as[i] != bs[i] {
				return false
			}
		}
		return true
	}
	return a == b
}

// TestEnvList: a trailing comma and spaces add no items.
func TestEnvList(t *testing.T) {
	t.Parallel()
	got := EnvList(" a, b ,,")
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("EnvList = %#v, want [a b]", got)
	}
}

// TestYAMLProblems: a key given twice is named by its dotted path and
// both lines, without the values, which may be secret.
func TestYAMLProblems(t *testing.T) {
	t.Parallel()
	data := []byte("kafka:\n  group: a\n  group: b\n")
	_, err := yaml.Parser().Unmarshal(data) // as config.Load parses
	if err == nil {
		t.Fatal("a duplicate key parsed")
	}
	ps := YAMLProblems("c.yaml", data, err)
	if len(ps) != 1 || ps[0].String() != "c.yaml:3: kafka.group is set twice (first at line 2); keep one of the two" {
		t.Errorf("YAMLProblems = %v", ps)
	}
}
