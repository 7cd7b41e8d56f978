package naming

import "testing"

func TestCheckPrefix(t *testing.T) {
	for _, p := range []string{"", "raw/", "raw", "raw-", "a/b/c/", "topics/2024/", "..x/", "a/..", "a/.", "x.y/", ".hidden/", "a/b.."} {
		if err := CheckPrefix(p); err != nil {
			t.Errorf("CheckPrefix(%q) = %v, want nil", p, err)
		}
	}
	for _, tt := range []struct{ prefix, want string }{
		{"../escape/", `has a ".." segment; names must stay under storage.url, so "." and ".." segments are not allowed; use a prefix such as raw/`},
		{"raw/../../x/", `has a ".." segment; names must stay under storage.url, so "." and ".." segments are not allowed; use a prefix such as raw/`},
		{"./raw/", `has a "." segment; names must stay under storage.url, so "." and ".." segments are not allowed; use a prefix such as raw/`},
		{"a/./b", `has a "." segment; names must stay under storage.url, so "." and ".." segments are not allowed; use a prefix such as raw/`},
		{"/abs/dir/", `starts with "/"; names are relative to storage.url, so drop the leading "/", as in "abs/dir/"`},
		{"/", `starts with "/"; names are relative to storage.url, so drop the leading "/", as in ""`},
		{"a//b/", `has an empty path segment ("//"); write single slashes, as in "a/b/"`},
		{"a///", `has an empty path segment ("//"); write single slashes, as in "a/"`},
		{"a\x00b/", "contains a NUL byte, which no store accepts in a name"},
	} {
		err := CheckPrefix(tt.prefix)
		if err == nil || err.Error() != tt.want {
			t.Errorf("CheckPrefix(%q) = %v\nwant %s", tt.prefix, err, tt.want)
		}
	}
}
