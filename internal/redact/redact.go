// Package redact hides the credentials a storage URL may carry, so that the
// URL can be shown in logs, errors and `config check` output. It is the one
// policy for that: config and storage both use it, and it imports nothing of
// Spillway's so that either can.
package redact

import (
	"net/url"
	"slices"
	"strings"
)

// Mark replaces every hidden part.
const Mark = "REDACTED"

// secretParams are query parameters that hold credentials, matched exactly
// (exactNames) or as part of a longer name (nameParts) such as
// access_key_id, X-Amz-Security-Token or X-Amz-Signature. The short exact
// names are the fields of an Azure SAS token: together they are the
// credential, so none of them is shown.
var (
	exactNames = []string{"sv", "se", "st", "sp", "spr", "srt", "ss", "sr", "si", "sas"}
	nameParts  = []string{"key", "secret", "token", "sig", "password", "passwd", "credential", "auth"}
)

// isSecretParam reports whether a query parameter of this name (in any
// case) holds a credential.
func isSecretParam(name string) bool {
	name = strings.ToLower(name)
	if slices.Contains(exactNames, name) {
		return true
	}
	for _, p := range nameParts {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

// URL returns raw with its credentials replaced by Mark: the whole userinfo
// (a lone user name is usually a token, and an access key id names the
// account), the value of every parameter that holds a credential, the
// credentials of a URL given as a parameter's value (endpoint=
// http://user:pass@host), and the fragment (a '#' inside an unescaped secret starts one). Everything else is
// left as written, parameter order included, so that a user recognises the
// URL. A URL that does not parse is hidden whole: its parts can't be told
// apart, and the parser's own message would quote it.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Mark
	}
	changed := false
	if u.User != nil && !containerUser(u) {
		u.User = url.User(Mark)
		changed = true
	}
	if u.RawQuery != "" {
		var b strings.Builder
		rest := u.RawQuery
		for rest != "" {
			// Both '&' and ';' end a parameter: Go's parser drops a
			// parameter with ';' rather than read it, so treat it as
			// a separator and judge each side on its name.
			i := strings.IndexAny(rest, "&;")
			param, sep := rest, ""
			if i >= 0 {
				param, sep, rest = rest[:i], rest[i:i+1], rest[i+1:]
			} else {
				rest = ""
			}
			name, _, hasValue := strings.Cut(param, "=")
			dec, err := url.QueryUnescape(name)
			if err != nil {
				dec = name
			}
			if isSecretParam(dec) && hasValue {
				param = name + "=" + Mark
				changed = true
			} else if hasValue {
				if v, ok := nestedURL(param[len(name)+1:]); ok {
					param = name + "=" + v
					changed = true
				}
			}
			b.WriteString(param + sep)
		}
		u.RawQuery = b.String()
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = Mark, ""
		changed = true
	}
	if !changed {
		return raw
	}
	return u.String()
}

// containerUser reports whether u's userinfo is an Azure container's name,
// not a credential: Hadoop's abfs and wasb URLs (the form Iceberg tables on
// Azure use) name the container there, as in
// abfs://container@account.dfs.core.windows.net/path. A password would
// still be a credential, so a userinfo with one is hidden as any other.
func containerUser(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "abfs", "abfss", "wasb", "wasbs":
		_, hasPassword := u.User.Password()
		return !hasPassword
	}
	return false
}

// nestedURL redacts a query parameter's value that is itself a URL with
// credentials, such as S3's endpoint=http://user:pass@host:9000, as
// written or percent-encoded. ok is false when there is nothing to hide.
func nestedURL(raw string) (string, bool) {
	dec, err := url.QueryUnescape(raw)
	if err != nil {
		dec = raw
	}
	if !strings.Contains(dec, "://") {
		return "", false
	}
	shown := URL(dec)
	if shown == dec {
		return "", false
	}
	if dec == raw {
		return shown, true
	}
	// Escaped as it was, so the URL around it still reads the same.
	return url.QueryEscape(shown), true
}

// Secrets returns the credentials raw carries, as they may appear on their
// own in a library's message (a password quoted without its URL): the user
// name and password of raw and of a URL in a parameter's value, and the
// values of parameters that hold a credential. Values shorter than 4 bytes
// are left out: replacing them would mangle unrelated text.
func Secrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	add := func(v string) {
		if len(v) >= 4 && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if u.User != nil && !containerUser(u) {
		add(u.User.Username())
		p, _ := u.User.Password()
		add(p)
	}
	for name, vs := range u.Query() {
		for _, v := range vs {
			if isSecretParam(name) {
				add(v)
			} else if strings.Contains(v, "://") {
				for _, s := range Secrets(v) {
					add(s)
				}
			}
		}
	}
	if u.Fragment != "" {
		add(u.Fragment)
	}
	return out
}
