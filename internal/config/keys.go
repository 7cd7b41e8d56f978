package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/config/decode"
	"github.com/spillway/spillway/internal/format/formatopts"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/registry"
)

// Default returns the built-in defaults. docs/config.md is generated from
// them (package configdoc), so a default changed here changes the
// reference. It is not a valid config on its own: storage.url and
// kafka.topics (or kafka.topic_regex) have no sensible default and must be
// set.
func Default() *Config {
	return &Config{
		Kafka: Kafka{
			Brokers:     []string{"127.0.0.1:9092"},
			Group:       "spillway",
			StartOffset: "earliest",
			ClientID:    "spillway",
			// Kafka's own default for consumers.
			SessionTimeout: 45 * time.Second,
			StartupTimeout: 60 * time.Second,
		},
		Storage: Storage{
			PartSize:          8 * MiB,
			UploadConcurrency: 4,
			MaxRetries:        9,
			TopicIDChange:     "fail",
			EarlierFiles:      "none",
			ConditionalWrites: "required",
		},
		File: File{
			NameTemplate:    "{{topic}}-{{partition}}-{{start_offset}}",
			TimestampSource: "wallclock",
			Timezone:        "UTC",
			Extension:       "auto",
			MaxRecords:      0,
			MaxBytes:        128 * MiB,
			MaxAge:          5 * time.Minute,
		},
		Format: Format{
			Type:           "jsonl",
			Compression:    "none",
			Fields:         formatopts.DefaultFields(),
			ValueEncoding:  "none",
			Envelope:       true,
			BytesSeparator: DefaultBytesSeparator,
		},
		SchemaRegistry: registry.Options{Decode: "value"},
		Backpressure:   Backpressure{MemoryLimit: "auto", DiskLimit: "auto"},
		Errors:         Errors{Tolerance: "none", NullValues: "write"},
		Iceberg:        iceberg.Defaults(),
		Admin:          admin.Options{Listen: "127.0.0.1:8080"},
		Log:            Log{Level: "info", Format: "text"},
		Shutdown:       Shutdown{Timeout: 30 * time.Second},
	}
}

// keySpec describes one leaf key such as "kafka.sasl.password".
type keySpec struct {
	key    string // dotted path, the public name
	env    string // SPILLWAY_KAFKA_SASL_PASSWORD
	kind   decode.Kind
	secret bool  // never shown in output or errors
	index  []int // field index path into Config, for reflect.FieldByIndex
}

// decodeKey is what package decode needs to convert a value of s.
func (s *keySpec) decodeKey() decode.Key {
	return decode.Key{Name: s.key, Kind: s.kind, Secret: s.secret}
}

// envPrefix starts every environment variable that sets a key.
const envPrefix = "SPILLWAY_"

// secretKeys are redacted everywhere. storage.url is handled apart because
// only parts of it are secret.
var secretKeys = append([]string{"kafka.sasl.password", "schema_registry.password", "admin.token"}, icebergSecrets...)

// keyTable is every key, derived once from Config's koanf tags so that a
// field added to Config is loadable, validated for type, settable from the
// environment and rendered by YAML without touching this file. It is never
// mutated after package initialisation.
type keyTable struct {
	leaves   []*keySpec          // in struct order, which is docs/config.md's order
	byKey    map[string]*keySpec // "kafka.brokers"
	byEnv    map[string]*keySpec // "SPILLWAY_KAFKA_BROKERS"
	sections []string            // "kafka", "kafka.tls", ... in struct order
	all      []string            // sections and leaves, in struct order
}

var keys = buildKeyTable()

func buildKeyTable() *keyTable {
	t := &keyTable{byKey: map[string]*keySpec{}, byEnv: map[string]*keySpec{}}
	t.walk(reflect.TypeFor[Config](), "", nil)
	return t
}

var (
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[time.Duration]()
)

func (t *keyTable) walk(typ reflect.Type, prefix string, index []int) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("koanf")
		if name == "" || name == "-" {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		idx := append(slices.Clone(index), i)
		t.all = append(t.all, key)
		if f.Type.Kind() == reflect.Struct {
			t.sections = append(t.sections, key)
			t.walk(f.Type, key, idx)
			continue
		}
		s := &keySpec{
			key:    key,
			env:    envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_")),
			kind:   kindOf(f.Type, key),
			secret: slices.Contains(secretKeys, key),
			index:  idx,
		}
		if _, dup := t.byEnv[s.env]; dup {
			panic("config: two keys map to environment variable " + s.env)
		}
		t.leaves = append(t.leaves, s)
		t.byKey[key] = s
		t.byEnv[s.env] = s
	}
}

func kindOf(typ reflect.Type, key string) decode.Kind {
	switch {
	case typ == sizeType:
		return decode.Size
	case typ == durationType:
		return decode.Duration
	case typ.Kind() == reflect.String:
		return decode.String
	case typ.Kind() == reflect.Bool:
		return decode.Bool
	case typ.Kind() == reflect.Int, typ.Kind() == reflect.Int64:
		return decode.Int
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.String:
		return decode.List
	}
	// A programming error in Config, caught by any test that loads a config.
	panic(fmt.Sprintf("config: key %s has unsupported type %s", key, typ))
}

func (t *keyTable) isSection(key string) bool { return slices.Contains(t.sections, key) }

// children lists the names directly under a section ("" for the top level),
// for messages that tell a user what a section takes.
func (t *keyTable) children(section string) []string {
	var out []string
	add := func(key string) {
		rest, ok := key, section == ""
		if !ok {
			rest, ok = strings.CutPrefix(key, section+".")
		}
		if ok && !strings.Contains(rest, ".") {
			out = append(out, rest)
		}
	}
	for _, k := range t.all {
		add(k)
	}
	return out
}

// flatten reads every leaf of c into a map keyed by dotted path, with lists
// copied so that the map shares no memory with c.
func flatten(c *Config) map[string]any {
	v := reflect.ValueOf(c).Elem()
	out := make(map[string]any, len(keys.leaves))
	for _, s := range keys.leaves {
		f := v.FieldByIndex(s.index)
		switch s.kind {
		case decode.List:
			out[s.key] = slices.Clone(f.Interface().([]string))
		case decode.Int:
			out[s.key] = f.Int()
		default:
			out[s.key] = f.Interface()
		}
	}
	return out
}

// KeyInfo is one leaf key as the reference (package configdoc) documents
// it.
type KeyInfo struct {
	Key    string // "kafka.sasl.password", the public name
	Env    string // "SPILLWAY_KAFKA_SASL_PASSWORD"
	Secret bool   // never shown in output or errors
	// Default is the key's value in Default: a string, []string, bool,
	// int64, Size or time.Duration.
	Default any
}

// Keys lists every leaf key in the key table's order, which is
// docs/config.md's, with its default.
func Keys() []KeyInfo {
	defaults := flatten(Default())
	out := make([]KeyInfo, len(keys.leaves))
	for i, s := range keys.leaves {
		out[i] = KeyInfo{Key: s.key, Env: s.env, Secret: s.secret, Default: defaults[s.key]}
	}
	return out
}
