package config

import (
	"bytes"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
)

// redacted replaces every secret in output.
const redacted = "REDACTED"

// Redacted returns a deep copy of c with secrets replaced by "REDACTED":
// kafka.sasl.password (when set) and any credential in storage.url, whether
// in its userinfo or in a query parameter such as access_key, secret or an
// Azure SAS token (sig, sv, ...). It is what may be printed or logged.
func (c *Config) Redacted() *Config {
	cp := *c
	v := reflect.ValueOf(&cp).Elem()
	for _, s := range keys.leaves {
		f := v.FieldByIndex(s.index)
		switch {
		case s.kind == kindList: // copy, so that cp shares nothing with c
			f.Set(reflect.ValueOf(slices.Clone(f.Interface().([]string))))
		case s.secret && f.String() != "":
			f.SetString(redacted)
		}
	}
	cp.Storage.URL = redactURL(cp.Storage.URL)
	return &cp
}

// secretParamNames are query parameters that hold credentials, exactly or
// (for the substrings in secretParamParts) as part of a longer name such as
// access_key_id or x-amz-security-token. The short ones are Azure SAS token
// fields: together they are the credential.
var (
	secretParamNames = []string{"sig", "sv", "se", "st", "sp", "spr", "srt", "ss", "sr", "sas"}
	secretParamParts = []string{"key", "secret", "token", "password", "passwd", "credential", "signature", "auth"}
)

func isSecretParam(name string) bool {
	name = strings.ToLower(name)
	if slices.Contains(secretParamNames, name) {
		return true
	}
	for _, p := range secretParamParts {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

// redactURL replaces the credentials in a storage URL. It leaves the rest
// as written (parameter order included) so that the user recognises it.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Can't tell the parts apart; hide anything that might hold a secret.
		if strings.ContainsAny(raw, "@?#") {
			return redacted
		}
		return raw
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
		} else { // a lone user name is usually a token
			u.User = url.User(redacted)
		}
		changed = true
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			name, _, _ := strings.Cut(p, "=")
			dec, err := url.QueryUnescape(name)
			if err != nil {
				dec = name
			}
			if isSecretParam(dec) {
				params[i] = name + "=" + redacted
				changed = true
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	if u.Fragment != "" { // a '#' inside an unescaped secret starts a fragment
		u.Fragment, u.RawFragment = redacted, ""
		changed = true
	}
	if !changed {
		return raw
	}
	return u.String()
}

// YAML renders the effective config, secrets redacted, with DESIGN.md's
// keys in its order: sizes as "8MiB", durations as "5m0s". Loading the
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
