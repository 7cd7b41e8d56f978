package partvalue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKeyRendering(t *testing.T) {
	long := func(prefix string, key []byte) string {
		sum := sha256.Sum256(key)
		return prefix + "!h" + hex.EncodeToString(sum[:])
	}
	a200 := bytes.Repeat([]byte("a"), 200)
	a201 := bytes.Repeat([]byte("a"), 201)
	slashes := bytes.Repeat([]byte("/"), 67)                // 201 bytes escaped
	straddle := append(bytes.Repeat([]byte("a"), 133), '/') // the escape at 133 would end at 136
	straddle = append(straddle, bytes.Repeat([]byte("x"), 70)...)
	for _, tc := range []struct {
		name string
		key  []byte
		want string
	}{
		{"null", nil, "null"},
		{"empty", []byte{}, "!empty"},
		{"the word null", []byte("null"), "!6Eull"},
		{"NULL is not null", []byte("NULL"), "NULL"},
		{"null with more", []byte("nullx"), "nullx"},
		{"the word !empty", []byte("!empty"), "!21empty"},
		{"plain", []byte("user-123_x.y"), "user-123_x.y"},
		{"slash", []byte("a/b"), "a!2Fb"},
		{"dot", []byte("."), "!2E"},
		{"dot dot", []byte(".."), "!2E!2E"},
		{"three dots", []byte("..."), "!2E.!2E"},
		{"leading dot", []byte(".a"), "!2Ea"},
		{"trailing dot", []byte("a."), "a!2E"},
		{"leading underscore", []byte("_a"), "!5Fa"},
		{"trailing underscore", []byte("a_"), "a_"},
		{"bang", []byte("!"), "!21"},
		{"percent", []byte("100%"), "100!25"},
		{"space and colon", []byte("k: v"), "k!3A!20v"},
		{"utf-8", []byte("é"), "!C3!A9"},
		{"control and high bytes", []byte{0, 0x1f, 0x7f, 0xff}, "!00!1F!7F!FF"},
		{"backslash, star, question, quotes", []byte(`\*?"'`), "!5C!2A!3F!22!27"},
		{"200 bytes stay whole", a200, string(a200)},
		{"201 bytes are cut", a201, long(strings.Repeat("a", 134), a201)},
		{"escapes are cut whole", slashes, long(strings.Repeat("!2F", 44), slashes)},
		{"cut before a straddling escape", straddle, long(strings.Repeat("a", 133), straddle)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(AppendKey(nil, tc.key))
			if got != tc.want {
				t.Fatalf("rendered %q, want %q", got, tc.want)
			}
			if n := KeyLen(tc.key); n < len(got) {
				t.Errorf("keyLen = %d, rendering has %d bytes", n, len(got))
			}
			checkSafeKey(t, got)
			key, cut, ok := ParseKey(got)
			wantCut := len(tc.key) > 0 && escapedLen(tc.key) > MaxKeyLen
			switch {
			case !ok:
				t.Fatalf("ParseKey(%q) failed", got)
			case cut != wantCut:
				t.Errorf("ParseKey(%q) cut = %v, want %v", got, cut, wantCut)
			case !cut && !sameKey(key, tc.key):
				t.Errorf("ParseKey(%q) = %q, want %q", got, key, tc.key)
			case cut && !bytes.HasPrefix(tc.key, key):
				t.Errorf("ParseKey(%q) = %q, not a prefix of the key", got, key)
			}
		})
	}
}

// TestParseKeyRejects: text Render writes for no key is not a key, so that
// each name maps back to one key.
func TestParseKeyRejects(t *testing.T) {
	hash := strings.Repeat("0", 64)
	for _, s := range []string{
		"", ".", "..", "_a", ".a", "a.", "a/b", "a b", "é",
		"!", "!2", "!2f", "!6Eull!",
		"!41",    // 'A' escaped
		"!4Eull", // 'N' escaped
		"null!",
		"!empt", "!emptyy",
		strings.Repeat("a", 201),
		strings.Repeat("a", 134) + "!h" + strings.Repeat("0", 63), // short hash
		strings.Repeat("a", 134) + "!h" + strings.Repeat("A", 64), // upper-case hash
		strings.Repeat("a", 131) + "!h" + hash,                    // prefix too short
		strings.Repeat("a", 135) + "!h" + hash,                    // prefix too long
		"_" + strings.Repeat("a", 133) + "!h" + hash,              // '_' first
		strings.Repeat("a", 132) + "!41" + "!h" + hash[:63],       // 'A' escaped
	} {
		if key, cut, ok := ParseKey(s); ok {
			t.Errorf("ParseKey(%q) = %q, %v, true; want no key", s, key, cut)
		}
	}
	// The cut form itself, and one whose prefix ends with '.', which is
	// no key's last byte there.
	for _, s := range []string{
		strings.Repeat("a", 134) + "!h" + hash,
		strings.Repeat("a", 133) + "." + "!h" + hash,
		strings.Repeat("!2F", 44) + "!h" + hash,
	} {
		if _, cut, ok := ParseKey(s); !ok || !cut {
			t.Errorf("ParseKey(%q) = _, %v, %v; want a cut key", s, cut, ok)
		}
	}
}

// FuzzKeyInjective: two different keys never render the same, and each
// rendering reads back as its key. The seeds cover the special renderings;
// run `go test -fuzz FuzzKeyInjective ./internal/naming/partvalue/` for more.
func FuzzKeyInjective(f *testing.F) {
	for _, seed := range []struct {
		a, b         string
		aNull, bNull bool
	}{
		{"", "", true, false},
		{"null", "", false, true},
		{"!empty", "", false, false},
		{"!6Eull", "null", false, false},
		{".", "..", false, false},
		{"_a", "!5Fa", false, false},
		{"a.", "a!2E", false, false},
		{"a/b", "a!2Fb", false, false},
		{strings.Repeat("x", 201), strings.Repeat("x", 202), false, false},
		{strings.Repeat("/", 70), strings.Repeat("/", 71), false, false},
	} {
		f.Add([]byte(seed.a), []byte(seed.b), seed.aNull, seed.bNull)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, aNull, bNull bool) {
		a, b = fuzzKey(a, aNull), fuzzKey(b, bNull)
		ra, rb := string(AppendKey(nil, a)), string(AppendKey(nil, b))
		if ra == rb && !sameKey(a, b) {
			t.Fatalf("keys %q and %q both render %q", a, b, ra)
		}
		checkSafeKey(t, ra)
		key, cut, ok := ParseKey(ra)
		if !ok || (!cut && !sameKey(key, a)) || (cut && !bytes.HasPrefix(a, key)) {
			t.Fatalf("ParseKey(%q) = %q, %v, %v; want %q", ra, key, cut, ok, a)
		}
	})
}

// fuzzKey makes the fuzzer's bytes a null key or a non-nil one.
func fuzzKey(b []byte, null bool) []byte {
	if null {
		return nil
	}
	if b == nil {
		return []byte{}
	}
	return b
}

// sameKey compares keys, null apart from empty.
func sameKey(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// checkSafeKey asserts what every key rendering promises.
func checkSafeKey(t *testing.T, s string) {
	t.Helper()
	if s == "" || s == "." || s == ".." {
		t.Fatalf("rendering %q is a path segment of its own", s)
	}
	if len(s) > MaxKeyLen {
		t.Fatalf("rendering %q has %d bytes, more than %d", s, len(s), MaxKeyLen)
	}
	if s[0] == '_' || s[0] == '.' || s[len(s)-1] == '.' {
		t.Fatalf("rendering %q starts with '_' or '.', or ends with '.'", s)
	}
	for i := 0; i < len(s); i++ {
		if !IsKeyChar(s[i]) {
			t.Fatalf("rendering %q has byte %q", s, s[i])
		}
	}
}
