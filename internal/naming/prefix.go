package naming

import (
	"errors"
	"fmt"
	"strings"
)

// CheckPrefix reports why prefix can't be storage.prefix, or nil. It is the
// one rule for it: config validation calls it, so `config check` and `run`
// refuse the same prefixes.
//
// The rule is the one Parse applies to a template's literal text. Object
// stores keep "/raw", "a//b" and "a/./b" verbatim while the local
// filesystem resolves them, so one prefix would name different objects on
// different stores, and a local listing (verify reads one) would not give
// the names back as written; ".." would leave the storage directory. The prefix is joined to
// a rendered name as it is, so only text followed by "/" is a path segment:
// what follows the last "/" starts every file name ("raw/" and "raw-" are
// both fine).
//
// The error reads after the prefix, as in `"../x/" has a ".." segment ...`.
func CheckPrefix(prefix string) error {
	if strings.IndexByte(prefix, 0) >= 0 {
		return errors.New("contains a NUL byte, which no store accepts in a name")
	}
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("starts with \"/\"; names are relative to storage.url, so drop the leading \"/\", as in %q", strings.TrimLeft(prefix, "/"))
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] { // the last one is not followed by "/"
		switch seg {
		case "":
			return fmt.Errorf("has an empty path segment (\"//\"); write single slashes, as in %q", collapseSlashes(prefix))
		case ".", "..":
			return fmt.Errorf("has a %q segment; names must stay under storage.url, so \".\" and \"..\" segments are not allowed; use a prefix such as raw/", seg)
		}
	}
	return nil
}

func collapseSlashes(s string) string {
	for strings.Contains(s, "//") {
		s = strings.ReplaceAll(s, "//", "/")
	}
	return s
}
