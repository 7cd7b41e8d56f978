package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
	env "github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/spillway/spillway/internal/config/decode"
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
		return nil, &Error{Problems: decode.YAMLProblems(name, data, err)}
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
			if val, p := decode.Value(s.decodeKey(), key, v); p != nil {
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
				strings.Join(keys.children(key), ", "), decode.Describe(v))
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
	if s.kind == decode.List {
		raw = decode.EnvList(value)
	}
	v, p := decode.Value(s.decodeKey(), name, raw)
	if p != nil {
		*ps = append(*ps, *p)
		bad[s.key] = true
		return "", nil
	}
	return s.key, v
}
