// Package connect turns a Kafka Connect sink connector's config into a
// Spillway config: Aiven's S3, GCS and Azure Blob sinks, and Confluent's S3
// sink. It is `spillway config import`.
//
// The promise is a cut-over without surprises (docs/design.md, "Moving
// from Kafka Connect"):
//
//   - Every key of the connector config is either mapped, on a YAML line
//     that names it, or listed in a comment that says why it isn't and
//     what to do. Where Spillway lacks the feature (a partitioner, a
//     schema projection, a format's content), the line says so: nothing is
//     quietly replaced by something close.
//   - The objects get the names the connector gives them: the template,
//     the zero padding and the extension are written out (file.extension),
//     and a naming rule Spillway can't reproduce is an error, not a
//     different layout.
//   - The product's defaults that differ from Spillway's (Aiven's csv,
//     [value], base64, gzip on S3; Confluent's flush.size and null policy)
//     are written out, so the YAML says what it does.
//   - kafka.group is Connect's group for the connector, connect-<name>, and
//     storage.earlier_files is foreign: Spillway starts at the connector's
//     committed offsets and leaves its files alone.
//   - Credentials are never copied. They are named as the environment
//     variables to set.
//   - Converters are mapped (registry converters to schema_registry.*,
//     ByteArrayConverter to base64) or said not to be; a converter that
//     can't be mapped never goes with errors.tolerance=all, which would
//     skip every record it makes unwritable while the run exits 0.
//   - Every line that changes what is stored is also a warning (Result's
//     Warnings, printed on stderr), naming the connector's key.
//
// Errors (input that isn't a connector config, a connector it doesn't
// know, a layout it can't express) are *Error.
//
// This package holds what every sink shares: reading the config
// (Connector: its keys, and which are used), the YAML being written (Doc:
// its lines, warnings, credentials to set and keys not mapped), the keys
// Connect itself defines (kafka, errors, the converters and the schema
// registry), and Import, which runs them around one product's rules. The
// rules are in the subpackages aiven and confluent, each of which gives
// its Sinks; package sinks hands them all to Import, for the command.
// Nothing here imports a product's package.
package connect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spillway/spillway/internal/config"
)

// Error is input that can't be imported: the message says what and why.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Errorf makes an *Error.
func Errorf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// The products whose sinks Spillway imports: Sink.Product, and what
// --from names.
const (
	Aiven     = "aiven"
	Confluent = "confluent"
	Iceberg   = "iceberg" // Apache Iceberg's Kafka Connect sink
)

// Result is an imported config.
type Result struct {
	// YAML is the Spillway config, comments included.
	YAML []byte
	// Warnings are the places where what Spillway stores will differ from
	// what the connector stored (names, content, records skipped), one
	// sentence each naming the connector's key; the YAML says the same on
	// the lines concerned.
	Warnings []string
}

// Sink is a connector class Spillway imports, with its product's rules.
// The products' packages make them (aiven.Sinks, confluent.Sinks), and
// the caller hands them to Import, so that this package needs neither.
type Sink struct {
	Class   string // connector.class, in full
	Product string // Aiven or Confluent
	Title   string // for the YAML's header: "Aiven's S3 sink"
	// Map maps the product's own keys (storage, format, object names),
	// after the keys every sink shares (kafka, errors, the converters)
	// are read. It sets the Connector's Stored, which the mapping of the
	// registry converters that follows reads.
	Map func(c *Connector, d *Doc) error
	// Explain says why a key no mapping used has no line in the YAML, for
	// the keys Connect's own don't cover; why prefixes the key as shown.
	Explain func(key string, why func(string) string) string
}

// Import reads a connector config (Connect's JSON, with or without the
// {"name":..,"config":{..}} wrapper, or a .properties file) named name,
// and returns its Spillway config, by the rules of the sink among sinks
// that its connector.class names. from is "" or a product of sinks
// (aiven, confluent): when set, connector.class must agree with it.
func Import(name string, data []byte, from string, sinks []Sink) (*Result, error) {
	var products []string
	for _, s := range sinks {
		if !slices.Contains(products, s.Product) {
			products = append(products, s.Product)
		}
	}
	if from != "" && !slices.Contains(products, from) {
		return nil, Errorf("--from %q: use %s", from, strings.Join(products, " or "))
	}
	props, connName, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	c := &Connector{File: filepath.Base(name), props: props, used: map[string]bool{}, Stored: map[string]bool{}}
	k, err := detect(c, from, sinks)
	if err != nil {
		return nil, err
	}
	if connName == "" {
		connName = c.props["name"]
	}
	c.Use("name")
	if strings.TrimSpace(connName) == "" {
		return nil, Errorf("%s: the connector has no name: Kafka Connect's consumer group for it is connect-<name>, so Spillway needs the name to continue where the connector stopped; add \"name\"", c.File)
	}
	c.name = connName
	readConverters(c)
	d := newDoc()
	d.header = append(d.header,
		fmt.Sprintf("Imported by `spillway config import` from %s: %s, connector %q.", c.File, k.Title, connName),
		"Check it with `spillway config check FILE`; read every comment before the cut-over (see docs/migration.md).")
	if err := importKafka(c, d); err != nil {
		return nil, err
	}
	importErrors(c, d)
	if err := k.Map(c, d); err != nil {
		return nil, err
	}
	if err := importRegistry(c, d); err != nil {
		return nil, err
	}
	guardTolerance(c, d)
	d.Set("storage", "earlier_files", "foreign", "files without a ledger entry are the connector's: start at its committed offsets, leave its files alone")
	for _, key := range c.unused() {
		d.NotMapped(c.explain(key, k))
	}
	if v, ok := c.props["transforms"]; ok && strings.TrimSpace(v) != "" {
		d.Warn("transforms=%s: Spillway has no Single Message Transforms; it stores the records as they are in Kafka, untransformed", strings.TrimSpace(v))
	}
	out := d.render()
	// What is printed must pass `config check`: a combination the
	// connector took and Spillway refuses is said here, not at the run.
	// Credentials come from the environment, so they are given stand-ins.
	var env []string
	for _, v := range []string{"SPILLWAY_KAFKA_SASL_PASSWORD", "SPILLWAY_SCHEMA_REGISTRY_PASSWORD"} {
		if strings.Contains(string(out), v) {
			env = append(env, v+"=stand-in")
		}
	}
	if _, err := config.LoadBytes(out, env); err != nil {
		return nil, Errorf("%s: these settings make a Spillway config that isn't valid, so nothing is printed:\n%v", c.File, err)
	}
	return &Result{YAML: out, Warnings: d.warnings}, nil
}

// detect reads connector.class and finds its sink. Connect also takes a
// class's simple name (an alias) where it is unique among installed
// plugins.
func detect(c *Connector, from string, sinks []Sink) (Sink, error) {
	class := strings.TrimSpace(c.props["connector.class"])
	c.Use("connector.class")
	var known []string
	for _, s := range sinks {
		known = append(known, s.Class)
	}
	sort.Strings(known)
	if class == "" {
		return Sink{}, Errorf("%s has no connector.class; it must name one of %s", c.File, strings.Join(known, ", "))
	}
	i := slices.IndexFunc(sinks, func(s Sink) bool { return s.Class == class })
	ok := i >= 0
	var k Sink
	if ok {
		k = sinks[i]
	} else if !strings.Contains(class, ".") {
		for _, s := range sinks {
			if strings.HasSuffix(s.Class, "."+class) && (from == "" || s.Product == from) {
				k, ok = s, true
			}
		}
	}
	if !ok {
		return Sink{}, Errorf("%s: connector.class %q is not a connector Spillway imports; it imports %s", c.File, class, strings.Join(known, ", "))
	}
	if from != "" && k.Product != from {
		return Sink{}, Errorf("%s: connector.class %q is %s, not --from %s", c.File, class, k.Title, from)
	}
	return k, nil
}

// parse reads Connect's JSON or a .properties file into its keys and
// values, and the wrapper's name when there is one.
func parse(name string, data []byte) (map[string]string, string, error) {
	base := filepath.Base(name)
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, "", Errorf("%s is empty; give a connector config as Kafka Connect's JSON or a .properties file", base)
	}
	if !utf8.Valid(data) {
		return nil, "", Errorf("%s is not text; give a connector config as Kafka Connect's JSON or a .properties file", base)
	}
	if trimmed[0] == '{' || trimmed[0] == '[' || strings.EqualFold(filepath.Ext(name), ".json") {
		return parseJSON(base, trimmed)
	}
	props, err := parseProperties(base, string(data))
	return props, "", err
}

func parseJSON(file string, data []byte) (map[string]string, string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		var se *json.SyntaxError
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, "", Errorf("%s is not valid JSON: it ends before its object is closed; give Kafka Connect's JSON, {\"name\": ..., \"config\": {...}} or the config object alone, or a .properties file", file)
		}
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return nil, "", Errorf("%s is not valid JSON (line %d: %v); give Kafka Connect's JSON, {\"name\": ..., \"config\": {...}} or the config object alone, or a .properties file", file, line, se)
		}
		return nil, "", Errorf("%s is not a JSON object of connector settings (%v); give {\"name\": ..., \"config\": {...}} or the config object alone", file, err)
	}
	if dec.More() {
		return nil, "", Errorf("%s holds more than one JSON value; give one connector config", file)
	}
	obj, name := top, ""
	if inner, ok := top["config"].(map[string]any); ok {
		obj = inner
		if n, ok := top["name"].(string); ok {
			name = n
		}
		for k := range top {
			if k != "name" && k != "config" && k != "tasks" && k != "type" {
				return nil, "", Errorf("%s: %q beside \"config\" is not part of Kafka Connect's {\"name\": ..., \"config\": {...}}; move it into \"config\"", file, k)
			}
		}
	}
	props := map[string]string{}
	for k, v := range obj {
		switch v := v.(type) {
		case string:
			props[k] = v
		case json.Number:
			props[k] = v.String()
		case bool:
			props[k] = strconv.FormatBool(v)
		case nil:
			// Connect treats null as unset.
		default:
			return nil, "", Errorf("%s: %q is a JSON %s; Kafka Connect takes strings (lists comma-separated)", file, k, jsonKind(v))
		}
	}
	return props, name, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// parseProperties reads Java's .properties syntax: "key=value" or
// "key: value" lines, "#" and "!" comments, backslash continuations and
// escapes. A line with no "=" or ":" is refused rather than read as Java
// would (a key and a value split at a space): a file that isn't a
// connector config should say so.
func parseProperties(file, text string) (map[string]string, error) {
	props := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continued(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		sep := -1
		for j := 0; j < len(line); j++ {
			if line[j] == '\\' {
				j++
				continue
			}
			if line[j] == '=' || line[j] == ':' {
				sep = j
				break
			}
		}
		if sep < 0 {
			return nil, Errorf("%s line %d is neither JSON nor a .properties \"key=value\" line: %q; give Kafka Connect's JSON or a .properties file", file, lineNo, clip(line, 60))
		}
		key := unescape(strings.TrimRight(line[:sep], " \t\f"))
		if key == "" {
			return nil, Errorf("%s line %d has no key before %q", file, lineNo, line[sep:sep+1])
		}
		props[key] = unescape(strings.TrimLeft(line[sep+1:], " \t\f"))
	}
	return props, nil
}

// continued reports a line ending in an odd number of backslashes.
func continued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+4 < len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+5], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += 4
					continue
				}
			}
			b.WriteByte('u')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Connector is the config being imported, with the keys used so far.
type Connector struct {
	// File is the config's file name, without its directory, for errors.
	File  string
	name  string
	props map[string]string
	used  map[string]bool
	// Conv is key.converter and value.converter, by part.
	Conv map[string]*Converter
	// Stored says which parts ("key", "value") the output holds or its
	// names use, so that their converters matter. A product's rules set
	// it before KeyContent, and the registry mapping after them, read it.
	Stored map[string]bool
}

// Get returns the first of keys that is set (a key and its legacy names),
// and marks them all as used.
func (c *Connector) Get(keys ...string) (key, val string, ok bool) {
	for _, k := range keys {
		c.used[k] = true
	}
	for _, k := range keys {
		if v, set := c.props[k]; set {
			return k, strings.TrimSpace(v), true
		}
	}
	return "", "", false
}

// Use marks keys as used: mapped, or explained where they are read.
func (c *Connector) Use(keys ...string) {
	for _, k := range keys {
		c.used[k] = true
	}
}

// Peek returns a key's value as set, untrimmed, without marking it used:
// for a key that is mapped only for some of its values, and otherwise left
// to be explained.
func (c *Connector) Peek(key string) (string, bool) {
	v, ok := c.props[key]
	return v, ok
}

// unused lists the keys no mapping took, sorted.
func (c *Connector) unused() []string {
	var out []string
	for k := range c.props {
		if !c.used[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// List splits a comma-separated value, as Connect does.
func List(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// secretKey reports a key whose value must never be printed.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, ".credentials.source") {
		return false // where the credentials are (URL, USER_INFO), not them
	}
	for _, s := range []string{"password", "secret", "credentials.json", "connection.string", "jaas", "sas.token", "account.key", "customer.key", "access.key", "private.key", "token", "user.info", "basic.auth"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Shown is how a key's value may appear in a comment.
func (c *Connector) Shown(key string) string {
	if secretKey(key) {
		return key + " (secret, not shown)"
	}
	v := strings.Join(strings.Fields(c.props[key]), " ")
	return key + "=" + clip(v, 80)
}
