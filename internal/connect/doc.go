package connect

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/config"
)

// Doc is the YAML being written: sections of keys, each line with the
// comment that says where it came from.
type Doc struct {
	header   []string
	env      []string // credentials to set: "NAME  (was key)"
	sections []*section
	unmapped []string
	warnings []string
}

type section struct {
	name  string
	lines []*line
}

type line struct {
	key, value, comment string
}

// sectionOrder is config's order, so the YAML reads like `config check`.
var sectionOrder = []string{"kafka", "storage", "file", "format", "iceberg", "schema_registry", "backpressure", "errors"}

func newDoc() *Doc {
	d := &Doc{}
	for _, s := range sectionOrder {
		d.sections = append(d.sections, &section{name: s})
	}
	return d
}

// Set writes key (under section; "a.b" for a nested key) with value, a
// string, []string, bool, int, int64, config.Size or time.Duration.
// Setting a key again replaces its value and comment in place.
func (d *Doc) Set(sec, key string, value any, comment string) {
	v := yamlValue(value)
	for _, s := range d.sections {
		if s.name != sec {
			continue
		}
		for _, l := range s.lines {
			if l.key == key {
				l.value, l.comment = v, comment
				return
			}
		}
		s.lines = append(s.lines, &line{key: key, value: v, comment: comment})
		return
	}
	panic("connect: unknown section " + sec)
}

// lookup returns a key's YAML value as set, or "".
func (d *Doc) lookup(sec, key string) string {
	for _, s := range d.sections {
		if s.name == sec {
			for _, l := range s.lines {
				if l.key == key {
					return l.value
				}
			}
		}
	}
	return ""
}

// unset removes a key set earlier; nothing if it isn't.
func (d *Doc) unset(sec, key string) {
	for _, s := range d.sections {
		if s.name == sec {
			s.lines = slices.DeleteFunc(s.lines, func(l *line) bool { return l.key == key })
		}
	}
}

// Note adds to the comment of a key already set; nothing if it isn't.
func (d *Doc) Note(sec, key, more string) {
	for _, s := range d.sections {
		if s.name == sec {
			for _, l := range s.lines {
				if l.key == key {
					l.comment += more
				}
			}
		}
	}
}

// Warn records a difference in names or content the user must know of.
func (d *Doc) Warn(format string, args ...any) {
	d.warnings = append(d.warnings, fmt.Sprintf(format, args...))
}

// Credential names an environment variable to set in place of a
// credential the connector config holds (from); its value is never copied.
func (d *Doc) Credential(env, from string) {
	d.env = append(d.env, fmt.Sprintf("%-34s (was %s)", env, from))
}

// NotMapped records a key of the connector's config that has no line in
// the YAML: the key, why, and what to do, in one sentence.
func (d *Doc) NotMapped(s string) {
	d.unmapped = append(d.unmapped, s)
}

func (d *Doc) render() []byte {
	var b strings.Builder
	for _, h := range d.header {
		b.WriteString("# " + h + "\n")
	}
	if len(d.env) > 0 {
		b.WriteString("#\n# Credentials were not copied. Set them in Spillway's environment:\n")
		for _, e := range d.env {
			b.WriteString("#   " + e + "\n")
		}
	}
	if len(d.warnings) > 0 {
		b.WriteString("#\n# Differences from the connector (printed on stderr too; see the lines marked NOT SUPPORTED, NOT THE SAME or NOT KNOWN):\n")
		for _, w := range d.warnings {
			writeWrapped(&b, "#   - ", "#     ", w)
		}
	}
	for _, s := range d.sections {
		if len(s.lines) == 0 {
			continue
		}
		b.WriteString(s.name + ":\n")
		// Nested keys ("tls.enabled") become nested maps, grouped under
		// their first appearance.
		done := map[int]bool{}
		for i, l := range s.lines {
			if done[i] {
				continue
			}
			parent, _, nested := strings.Cut(l.key, ".")
			if !nested {
				writeLine(&b, "  ", l.key, l.value, l.comment)
				continue
			}
			b.WriteString("  " + parent + ":\n")
			for j := i; j < len(s.lines); j++ {
				p2, c2, ok := strings.Cut(s.lines[j].key, ".")
				if ok && p2 == parent {
					writeLine(&b, "    ", c2, s.lines[j].value, s.lines[j].comment)
					done[j] = true
				}
			}
		}
	}
	if len(d.unmapped) > 0 {
		b.WriteString("\n# Not mapped: each key of the connector's config that has no line above, why, and what to do.\n")
		for _, u := range d.unmapped {
			writeWrapped(&b, "# ", "#   ", u)
		}
	}
	return []byte(b.String())
}

func writeLine(b *strings.Builder, indent, key, value, comment string) {
	s := indent + key + ": " + value
	if comment == "" {
		b.WriteString(s + "\n")
		return
	}
	// Long comments go on the lines above the key, so the value stays
	// easy to find.
	if len(s)+len(comment) > 110 {
		writeWrapped(b, indent+"# ", indent+"# ", comment)
		b.WriteString(s + "\n")
		return
	}
	b.WriteString(s + "  # " + comment + "\n")
}

// writeWrapped writes text as comment lines of at most about 100 columns.
func writeWrapped(b *strings.Builder, first, rest, text string) {
	n := len(first)
	b.WriteString(first)
	for i, w := range strings.Fields(text) {
		if i > 0 && n+1+len(w) > 100 {
			b.WriteString("\n" + rest)
			n = len(rest)
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	b.WriteByte('\n')
}

// plain are strings YAML reads back as the same string without quotes.
var plain = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./+-]*$`)

func yamlValue(v any) string {
	switch v := v.(type) {
	case string:
		return yamlString(v)
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = yamlString(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case config.Size:
		return v.String()
	case time.Duration:
		return v.String()
	}
	panic(fmt.Sprintf("connect: value of type %T", v))
}

func yamlString(s string) string {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~":
		return "'" + s + "'"
	}
	if plain.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Lookup is the value a line of the YAML has, as written ("" when there is
// none): for a product's rules that build on a shared key, such as the
// group.
func (d *Doc) Lookup(sec, key string) string { return strings.Trim(d.lookup(sec, key), `'"`) }
