package naming

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/naming/partvalue"
)

// keyTemplate puts the key in a path segment of its own, where "", "."
// and ".." would do harm, and next to a number, where it must not run
// into it.
const keyTemplate = "{{topic}}/{{partition}}/{{key}}/{{key}}-{{start_offset}}"

// TestKeyProperties renders random keys through a template and checks, for
// every one: the name holds only safe bytes, no segment is "", "." or
// "..", Match gives the key back, and no two different keys share a name.
func TestKeyProperties(t *testing.T) {
	tpl := mustParse(t, keyTemplate)
	r := rand.New(rand.NewPCG(1, 2))
	// Small alphabets make keys that differ by one byte, and keys made of
	// the bytes the rules treat apart, far more often than uniform bytes.
	alphabets := [][]byte{
		[]byte("._!/n-ul"),
		[]byte("a."),
		[]byte("!21"),
		nil, // any byte
	}
	seen := map[string][]byte{}
	add := func(key []byte) {
		t.Helper()
		v := Vars{Topic: "t", Partition: 3, StartOffset: 42, Key: key}
		name := tpl.Render(v)
		for i := 0; i < len(name); i++ {
			if c := name[i]; !partvalue.IsKeyChar(c) && c != '/' {
				t.Fatalf("key %q: name %q has byte %q", key, name, c)
			}
		}
		for _, seg := range strings.Split(name, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("key %q: name %q has segment %q", key, name, seg)
			}
		}
		if prev, dup := seen[name]; dup && !sameKey(prev, key) {
			t.Fatalf("keys %q and %q both render %q", prev, key, name)
		}
		seen[name] = key
		m, ok := tpl.Match(name)
		if !ok || m.Topic != "t" || m.Partition != 3 || m.StartOffset != 42 {
			t.Fatalf("key %q: Match(%q) = %+v, %v", key, name, m, ok)
		}
		_, cut, _ := partvalue.ParseKey(string(partvalue.AppendKey(nil, key)))
		if m.KeyCut != cut || (!cut && !sameKey(m.Key, key)) || (cut && !bytes.HasPrefix(key, m.Key)) {
			t.Fatalf("key %q: Match(%q) key = %q (cut %v)", key, name, m.Key, m.KeyCut)
		}
		if off, ok := tpl.MatchPartition(name, "t", 3); !ok || off != 42 {
			t.Fatalf("key %q: MatchPartition(%q) = %d, %v", key, name, off, ok)
		}
	}
	add(nil)
	add([]byte{})
	for i := 0; i < 20000; i++ {
		alpha := alphabets[i%len(alphabets)]
		n := r.IntN(8)
		if i%50 == 0 {
			n = 60 + r.IntN(250) // around the 200-byte cut
		}
		key := make([]byte, n)
		for j := range key {
			if alpha == nil {
				key[j] = byte(r.UintN(256))
			} else {
				key[j] = alpha[r.IntN(len(alpha))]
			}
		}
		add(key)
	}
	if len(seen) < 5000 {
		t.Errorf("only %d distinct names: the generator repeats itself", len(seen))
	}
}

// sameKey compares keys, null apart from empty.
func sameKey(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// fuzzKey makes the fuzzer's bytes a null key or a non-nil one (as
// partvalue's FuzzKeyInjective does).
func fuzzKey(b []byte, null bool) []byte {
	if null {
		return nil
	}
	if b == nil {
		return []byte{}
	}
	return b
}
