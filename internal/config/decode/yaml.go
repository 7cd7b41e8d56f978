package decode

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// YAMLProblems turns a YAML parser error, for the document data read from
// the file name (or "" for YAML given directly), into Problems keyed by
// file:line, the form editors and terminals let a user jump to.
func YAMLProblems(name string, data []byte, err error) []Problem {
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
