package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var benchDoc = []byte(`{"id":12345,"user":"user-42","tags":["a","b","c"],"nested":{"x":1.5,"y":null,"z":true},"payload":"` + strings.Repeat("lorem ipsum ", 75) + `"}`)

// The value check as it was before Scan, and encoding/json's, against
// Scan on the same 1 KiB document: each answers whether it is JSON in
// UTF-8 and whether it holds a line break.
func BenchmarkValidStd(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if !utf8.Valid(benchDoc) || !json.Valid(benchDoc) || bytes.IndexByte(benchDoc, '\n') >= 0 || bytes.IndexByte(benchDoc, '\r') >= 0 {
			b.Fatal()
		}
	}
}

func BenchmarkValidFastjson(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if !utf8.Valid(benchDoc) || fastjson.ValidateBytes(benchDoc) != nil || bytes.IndexByte(benchDoc, '\n') >= 0 || bytes.IndexByte(benchDoc, '\r') >= 0 {
			b.Fatal()
		}
	}
}

func BenchmarkValidScan(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if ok, multiline := Scan(benchDoc); !ok || multiline {
			b.Fatal()
		}
	}
}

func TestScanJSON(t *testing.T) {
	for _, c := range []struct {
		in            string
		ok, multiline bool
	}{
		{`{}`, true, false},
		{" {\n\"a\" : [1, 2.5e-3, -0, true, false, null, \"x\\u00e9\\n\"]\r\n} ", true, true},
		{`"héllo 😀 wörld, a long enough string to take the eight-byte path"`, true, false},
		{`"a` + "\n" + `b"`, false, false}, // a raw line break in a string
		{"\"a\x7fb\"", true, false},        // DEL is allowed
		{"\"\xff\"", false, false},         // not UTF-8
		{"\"\xed\xa0\x80\"", false, false}, // a surrogate in UTF-8
		{`{"a":1}{}`, false, false},
		{`[1,]`, false, false},
		{`{"a":}`, false, false},
		{`01`, false, false},
		{`1.`, false, false},
		{`-`, false, false},
		{`"\u12g4"`, false, false},
		{`"abc\`, false, false},
		{``, false, false},
		{strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth), true, false},
		{strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), false, false},
		{strings.Repeat(`{"a":`, maxJSONDepth) + "1" + strings.Repeat("}", maxJSONDepth), true, false},
	} {
		ok, multiline := Scan([]byte(c.in))
		if ok != c.ok || ok && multiline != c.multiline {
			t.Errorf("Scan(%.40q) = %v, %v; want %v, %v", c.in, ok, multiline, c.ok, c.multiline)
		}
		// The depth limit is encoding/json's.
		if want := json.Valid([]byte(c.in)) && utf8.ValidString(c.in); ok != want {
			t.Errorf("Scan(%.40q) = %v, encoding/json and utf8 say %v", c.in, ok, want)
		}
	}
}

// FuzzScanJSON: Scan must agree with encoding/json and utf8.Valid, or
// a line we write could be invalid JSON (or a valid value be quoted), and
// find every line break, or a JSON Lines record could be split.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":1}`, `"x"`, `1e5`, `-0`, `01`, `{"a":"\u0000"}`, "\"a\x01\"", `[1,]`, `{"a":1,}`,
		`tru`, `nul`, `1.`, `.5`, `"\x"`, `{"a" 1}`, `[1 2]`, `"\ud800"`, `1e`, `+1`, `NaN`, ` {} `, "{}\n", "\"\xff\"",
		"[\r\n1]", `"12345678\"12345678"`, "\"1234567\xc3\xa9123456789\"", string(benchDoc)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ok, multiline := Scan(b)
		if want := utf8.Valid(b) && json.Valid(b); ok != want {
			t.Fatalf("Scan(%q) = %v, encoding/json and utf8 say %v", b, ok, want)
		}
		if want := bytes.ContainsAny(b, "\r\n"); ok && multiline != want {
			t.Fatalf("Scan(%q) says multiline %v, want %v", b, multiline, want)
		}
	})
}

// TestCompactorMatchesEncodingJSON: the Compactor takes out exactly what
// json.Compact does, whatever the pieces it is given.
func TestCompactorMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{"a": [1, 2,` + "\n" + ` 3], "s": "x \" \\ y  z", "t":"\\", "u" : " \\\" "}`,
		"[\r\n\t\"a b\" ,\n  {\"k\" : \"v\\\\\" }\n]\n",
		` "  spaces  inside " `,
		"{\"\\\\\\\"\" : \" \\\\\\\\ \"}",
		` [ true , false , null , -1.5e3 , "é \u2028" ] `,
	}
	for _, doc := range docs {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(doc)); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		for piece := 1; piece <= len(doc); piece++ {
			var c Compactor
			var got []byte
			for rest := []byte(doc); len(rest) > 0; rest = rest[min(piece, len(rest)):] {
				got = c.Append(got, rest[:min(piece, len(rest))])
			}
			if string(got) != want.String() {
				t.Fatalf("%q in pieces of %d: compacted to %q, want %q", doc, piece, got, want.String())
			}
		}
	}
}

func FuzzMaybeJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, " [1] ", "1", "-0.5e3", "true", "false", "null", `""`, "text", "\t\n{}\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if json.Valid(b) && !Maybe(b) {
			t.Fatalf("Maybe rejects valid JSON %q", b)
		}
	})
}
