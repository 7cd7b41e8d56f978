package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/spillway/spillway/internal/config/decode"
	"github.com/spillway/spillway/internal/redact"
)

// redacted replaces every secret in output.
const redacted = redact.Mark

// Redacted returns a deep copy of c with secrets replaced by "REDACTED":
// kafka.sasl.password (when set) and any credential in storage.url, as
// redact.URL finds them. It is what may be printed or logged.
func (c *Config) Redacted() *Config {
	cp := *c
	v := reflect.ValueOf(&cp).Elem()
	for _, s := range keys.leaves {
		f := v.FieldByIndex(s.index)
		switch {
		case s.kind == decode.List: // copy, so that cp shares nothing with c
			f.Set(reflect.ValueOf(slices.Clone(f.Interface().([]string))))
		case s.secret && f.String() != "":
			f.SetString(redacted)
		}
	}
	cp.Storage.URL = redact.URL(cp.Storage.URL)
	cp.SchemaRegistry.URL = redact.URL(cp.SchemaRegistry.URL)
	cp.Iceberg = cp.Iceberg.Redacted() // a database DSN may hold a password, and properties secrets
	return &cp
}

// YAML renders the effective config, secrets redacted, with the keys in
// docs/config.md's order (the key table's): sizes as "8MiB", durations as "5m0s". Loading the
// output gives back the same Config, apart from the redacted secrets.
func (c *Config) YAML() ([]byte, error) {
	flat := flatten(c.Redacted())
	root := &yamlv3.Node{Kind: yamlv3.MappingNode}
	sections := map[string]*yamlv3.Node{"": root}
	for _, key := range keys.all {
		parent, name := "", key
		if i := strings.LastIndex(key, "."); i >= 0 {
			parent, name = key[:i], key[i+1:]
		}
		kn := &yamlv3.Node{Kind: yamlv3.ScalarNode, Value: name}
		vn := &yamlv3.Node{}
		if keys.isSection(key) {
			vn.Kind = yamlv3.MappingNode
			sections[key] = vn
		} else {
			var err error
			switch v := flat[key].(type) {
			case Size:
				err = vn.Encode(v.String())
			case time.Duration:
				err = vn.Encode(v.String())
			case []string:
				if v == nil {
					v = []string{} // "[]", not "null"
				}
				err = vn.Encode(v)
				vn.Style = yamlv3.FlowStyle
			default:
				err = vn.Encode(v)
			}
			if err != nil {
				return nil, fmt.Errorf("config: render %s: %w", key, err)
			}
		}
		sections[parent].Content = append(sections[parent].Content, kn, vn)
	}
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("config: render: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: render: %w", err)
	}
	return buf.Bytes(), nil
}
