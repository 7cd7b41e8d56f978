package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
	env "github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/spillway/spillway/internal/bytesize"
)

// Load builds the effective config from three layers, each overriding the
// one before: the defaults, the YAML file at path (skipped when path is ""),
// and the SPILLWAY_* variables in environ (as os.Environ returns them).
// It then validates the result.
//
// A config that can't be used yields an *Error listing every problem. A
// file that can't be read yields the wrapped read error (errors.Is works with
// fs.ErrNotExist).
func Load(path string, environ []string) (*Config, error) {
	var data []byte
	if path != "" {
		b, err := file.Provider(path).ReadBytes()
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		data = b
	}
	return load(path, data, environ)
}

// LoadBytes is Load with the YAML given directly instead of read from a
// file; tests and the demo use it.
func LoadBytes(yaml []byte, environ []string) (*Config, error) {
	return load("", yaml, environ)
}

// load is Load and LoadBytes. name is the file name for syntax errors.
func load(name string, data []byte, environ []string) (*Config, error) {
	k := koanf.New(".")
	// Layers are converted to their final Go types (and checked) before
	// koanf sees them, so that a bad value gets a message naming the key and
	// the expected type instead of a decoder error. koanf then only merges.
	if err := k.Load(flatMap(flatten(Default())), nil); err != nil {
		return nil, fmt.Errorf("config: load defaults: %w", err)
	}

	var ps problems
	bad := map[string]bool{} // keys whose value was rejected while loading

	raw, err := yaml.Parser().Unmarshal(data)
	if err != nil {
		// Nothing after a syntax error is trustworthy: report it alone.
		return nil, &Error{Problems: yamlProblems(name, data, err)}
	}
	fromFile := map[string]any{}
	walkYAML(raw, "", fromFile, &ps, bad)
	if err := k.Load(flatMap(fromFile), nil); err != nil {
		return nil, fmt.Errorf("config: load YAML: %w", err)
	}

	envp := env.Provider(".", env.Opt{
		Prefix:      envPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			return fromEnv(name, value, &ps, bad)
		},
	})
	if err := k.Load(envp, nil); err != nil {
		return nil, fmt.Errorf("config: load environment: %w", err)
	}

	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		// Every value already has its field's type, so this is a bug here.
		return nil, fmt.Errorf("config: decode: %w", err)
	}
	c.normalize()

	// A key that failed to load kept its default, and validating that
	// default would only add noise (say, "kafka.topics: required" right
	// after "kafka.topics: expected a list").
	for _, p := range c.problems() {
		if !isBad(bad, p.Key) {
			ps = append(ps, p)
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// flatMap is a koanf.Provider for an in-memory map keyed by dotted path.
type flatMap map[string]any

func (m flatMap) Read() (map[string]any, error) { return maps.Unflatten(m, "."), nil }

func (m flatMap) ReadBytes() ([]byte, error) {
	return nil, errors.New("flatMap provides a map, not bytes")
}

func isBad(bad map[string]bool, key string) bool {
	for b := range bad {
		if key == b || strings.HasPrefix(key, b+".") {
			return true
		}
	}
	return false
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlProblems turns a YAML parser error into Problems keyed by file:line,
// the form editors and terminals let a user jump to.
func yamlProblems(name string, data []byte, err error) []Problem {
	where := name
	if where == "" {
		where = "yaml"
	}
	var te *yamlv3.TypeError
	if errors.As(err, &te) {
		// The document parsed but does not decode into a mapping: a key
		// given twice, or a document that is not a mapping (a bare list
		// or string). The parser's message would quote the content, which
		// may be secret, and names a duplicate without its section.
		if ps := duplicateKeys(where, data); len(ps) > 0 {
			return ps
		}
		return []Problem{{Key: where, Msg: "the config must be a mapping of keys such as kafka: and storage:"}}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		where += ":" + m[1]
		msg = m[2]
		if n, _ := strconv.Atoi(m[1]); n > 0 {
			if lines := strings.Split(string(data), "\n"); n <= len(lines) && strings.Contains(lines[n-1], "\t") {
				msg += " (indent YAML with spaces, not tabs)"
			}
		}
	}
	return []Problem{{Key: where, Msg: "YAML syntax error: " + msg}}
}

// duplicateKeys reports every key that a mapping of the YAML in data gives
// more than once, by its dotted name and both lines. YAML refuses such a
// document rather than pick one of the values, and so does Spillway.
func duplicateKeys(where string, data []byte) []Problem {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil {
		return nil
	}
	var ps []Problem
	var walk func(n *yamlv3.Node, prefix string)
	walk = func(n *yamlv3.Node, prefix string) {
		switch n.Kind {
		case yamlv3.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yamlv3.MappingNode:
			first := map[string]int{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Tag == "!!merge" { // "<<: *anchor" may repeat and override
					continue
				}
				key := k.Value
				if prefix != "" {
					key = prefix + "." + k.Value
				}
				if line, dup := first[k.Value]; dup {
					ps = append(ps, Problem{Key: fmt.Sprintf("%s:%d", where, k.Line),
						Msg: fmt.Sprintf("%s is set twice (first at line %d); keep one of the two", key, line)})
				} else {
					first[k.Value] = k.Line
				}
				walk(n.Content[i+1], key)
			}
		}
	}
	walk(&doc, "")
	return ps
}

// walkYAML checks the parsed YAML m (found under prefix) against the known
// keys, converting each leaf into out and reporting unknown keys and values
// of the wrong type. Map keys are visited in sorted order so that problems
// come out in the same order every time.
func walkYAML(m map[string]any, prefix string, out map[string]any, ps *problems, bad map[string]bool) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v, key := m[n], n
		if prefix != "" {
			key = prefix + "." + n
		}
		if s, ok := keys.byKey[key]; ok {
			if val, p := convert(s, key, v); p != nil {
				*ps = append(*ps, *p)
				bad[key] = true
			} else {
				out[key] = val
			}
			continue
		}
		if !keys.isSection(key) {
			ps.add(key, "", "unknown key; %s", unknownKeyHint(key))
			continue
		}
		switch sub := v.(type) {
		case map[string]any:
			walkYAML(sub, key, out, ps, bad)
		case map[any]any: // YAML allows non-string keys; none of ours are
			strs := make(map[string]any, len(sub))
			for k, v := range sub {
				strs[fmt.Sprint(k)] = v
			}
			walkYAML(strs, key, out, ps, bad)
		case nil: // "tls:" with nothing under it: an empty section
		default:
			ps.add(key, "", "expected a section with keys %s, not %s",
				strings.Join(keys.children(key), ", "), describe(v))
			bad[key] = true
		}
	}
}

// unknownKeyHint suggests the key the user probably meant.
func unknownKeyHint(key string) string {
	if near, ok := nearest(key, keys.all); ok {
		return "did you mean " + near + "?"
	}
	// A known name in the wrong section, such as storage.name_template.
	last := key[strings.LastIndex(key, ".")+1:]
	for _, k := range keys.all {
		if k != key && strings.HasSuffix(k, "."+last) {
			return "did you mean " + k + "?"
		}
	}
	section, where := "", "the top level"
	if i := strings.LastIndex(key, "."); i >= 0 && keys.isSection(key[:i]) {
		section, where = key[:i], key[:i]
	}
	return fmt.Sprintf("%s takes %s", where, strings.Join(keys.children(section), ", "))
}

// notForUs tells variables that share the prefix but were never meant as
// config: Kubernetes injects SPILLWAY_SERVICE_HOST, SPILLWAY_PORT and
// SPILLWAY_PORT_8080_TCP... for a Service named spillway, the same with a
// middle part (SPILLWAY_METRICS_SERVICE_HOST) for one named
// spillway-metrics, and the test script sets SPILLWAY_TEST_*. Refusing to
// start over those would break deployments that did nothing wrong. Only
// names that are no config key come here.
func notForUs(name string) bool {
	rest := strings.TrimPrefix(name, envPrefix)
	if strings.HasPrefix(rest, "TEST_") {
		return true
	}
	return serviceLink.MatchString(rest)
}

// serviceLink matches the variables Kubernetes injects for a Service, less
// the prefix: NAME_SERVICE_HOST, NAME_SERVICE_PORT[_PORTNAME], NAME_PORT,
// NAME_PORT_8080_TCP[_PROTO|_PORT|_ADDR], where NAME may be empty.
var serviceLink = regexp.MustCompile(`^(?:[A-Z0-9_]*_)?(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT|PORT_[0-9]+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)$`)

// fromEnv maps one SPILLWAY_* variable to its key and converted value, or
// to "" (ignored) after recording a problem. The value of an unknown or
// rejected variable is never shown: it may be a secret.
func fromEnv(name, value string, ps *problems, bad map[string]bool) (string, any) {
	s, ok := keys.byEnv[name]
	if !ok && notForUs(name) {
		return "", nil
	}
	if !ok {
		hint := fmt.Sprintf("variables are %s followed by a key in upper case with _ for ., such as %s for kafka.brokers",
			envPrefix, keys.byKey["kafka.brokers"].env)
		envNames := make([]string, len(keys.leaves))
		for i, l := range keys.leaves {
			envNames[i] = strings.TrimPrefix(l.env, envPrefix)
		}
		if near, ok := nearest(strings.TrimPrefix(name, envPrefix), envNames); ok {
			hint = "did you mean " + envPrefix + near + "?"
		}
		ps.add(name, "", "unknown environment variable; %s", hint)
		return "", nil
	}
	var raw any = value
	if s.kind == kindList {
		// Lists are comma-separated; spaces around items and empty items
		// (from a trailing comma) are dropped.
		var items []any
		for item := range strings.SplitSeq(value, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		raw = items
	}
	v, p := convert(s, name, raw)
	if p != nil {
		*ps = append(*ps, *p)
		bad[s.key] = true
		return "", nil
	}
	return s.key, v
}

// convert turns a value from YAML or the environment into the Go type of
// key s, or explains (under the name where, a key or a variable) why it
// can't. Strings are accepted wherever a number or boolean is expected,
// because that is all the environment has.
func convert(s *keySpec, where string, v any) (any, *Problem) {
	show := func(v any) string {
		if s.secret {
			return ""
		}
		return fmt.Sprint(v)
	}
	wrongType := func() *Problem {
		if isScalar(v) {
			return &Problem{Key: where, Value: show(v), Msg: fmt.Sprintf("is %s; expected %s", describe(v), expect(s))}
		}
		return &Problem{Key: where, Msg: fmt.Sprintf("expected %s, not %s", expect(s), describe(v))}
	}
	if str, ok := v.(string); ok && strings.TrimSpace(str) == "" && s.kind != kindString && s.kind != kindList {
		return nil, &Problem{Key: where, Msg: "is empty; expected " + expect(s)}
	}
	switch s.kind {
	case kindString:
		switch v := v.(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		}
		if isScalar(v) { // a number where a string is expected, like a password of digits
			return fmt.Sprint(v), nil
		}
		return nil, wrongType()

	case kindList:
		items, ok := v.([]any)
		if v == nil {
			return []string(nil), nil
		}
		if !ok {
			return nil, wrongType()
		}
		var out []string // nil when empty, so that loaded and built configs compare equal
		for i, it := range items {
			if it == nil || !isScalar(it) {
				return nil, &Problem{Key: where, Msg: fmt.Sprintf("item %d is %s; expected a list of strings such as %s", i+1, describe(it), listExample(s.key))}
			}
			out = append(out, fmt.Sprint(it))
		}
		return out, nil

	case kindBool:
		switch v := v.(type) {
		case bool:
			return v, nil
		case string:
			if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
				return b, nil
			}
			return nil, &Problem{Key: where, Value: show(v), Msg: "is not valid; use true or false"}
		}
		return nil, wrongType()

	case kindInt:
		if n, ok := toInt64(v); ok {
			return n, nil
		}
		if v == nil || !isScalar(v) {
			return nil, wrongType()
		}
		return nil, &Problem{Key: where, Value: show(v), Msg: "is not a whole number"}

	case kindSize:
		if str, ok := v.(string); ok {
			n, err := ParseSize(str)
			var se *bytesize.Error
			if errors.As(err, &se) {
				return nil, &Problem{Key: where, Value: show(v), Msg: "is not a size; " + se.Hint}
			}
			return n, nil
		}
		if n, ok := toInt64(v); ok {
			if n < 0 {
				return nil, &Problem{Key: where, Value: show(v), Msg: "is not a size; sizes can't be negative"}
			}
			return Size(n), nil
		}
		if v == nil || !isScalar(v) {
			return nil, wrongType()
		}
		return nil, &Problem{Key: where, Value: show(v), Msg: "is not a size; " + bytesize.Hint}

	case kindDuration:
		if v == nil || !isScalar(v) {
			return nil, wrongType()
		}
		// A bare number such as 300 fails here with "missing unit", which
		// is the point: seconds or milliseconds would be a guess.
		d, err := time.ParseDuration(strings.TrimSpace(fmt.Sprint(v)))
		if err != nil {
			return nil, &Problem{Key: where, Value: show(v), Msg: "is not a duration; use Go syntax such as 5m, 30s or 1h30m"}
		}
		return d, nil
	}
	panic("config: unhandled kind") // keys.go only makes the kinds above
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

func isScalar(v any) bool {
	switch v.(type) {
	case string, bool, int, int64, uint64, float64:
		return true
	}
	return false
}

// describe names the YAML type of v for messages.
func describe(v any) string {
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

// expect names what key s takes, with an example.
func expect(s *keySpec) string {
	switch s.kind {
	case kindList:
		return "a list such as " + listExample(s.key)
	case kindBool:
		return "true or false"
	case kindInt:
		return "a whole number"
	case kindSize:
		return "a size such as 64MiB"
	case kindDuration:
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
