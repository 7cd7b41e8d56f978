package format

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

var benchDoc = []byte(`{"id":12345,"user":"user-42","tags":["a","b","c"],"nested":{"x":1.5,"y":null,"z":true},"payload":"` + strings.Repeat("lorem ipsum ", 75) + `"}`)

func BenchmarkValidStd(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if !json.Valid(benchDoc) {
			b.Fatal()
		}
	}
}

func BenchmarkValidFast(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if fastjson.ValidateBytes(benchDoc) != nil {
			b.Fatal()
		}
	}
}

// FuzzValidJSON: validJSON must agree with encoding/json on UTF-8 input,
// or a line we write could be invalid JSON (or a valid value be quoted).
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":1}`, `"x"`, `1e5`, `-0`, `01`, `{"a":"\u0000"}`, "\"a\x01\"", `[1,]`, `{"a":1,}`,
		`tru`, `nul`, `1.`, `.5`, `"\x"`, `{"a" 1}`, `[1 2]`, `"\ud800"`, `1e`, `+1`, `NaN`, ` {} `, "{}\n", string(benchDoc)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}
