// Package benchdata makes the records Spillway's benchmarks send: JSON
// objects of an exact size with varied fields and free text, so that no
// two values are alike and compression sees realistic data. The in-process
// BenchmarkDrain and the out-of-process userbench share it, so that the
// two measure the same data.
package benchdata

import (
	"fmt"
	"math/rand/v2"
)

var words = []string{
	"checkout", "login", "logout", "search", "click", "view", "purchase", "refund",
	"mobile", "desktop", "tablet", "chrome", "firefox", "safari", "eu-west-1",
	"us-east-2", "ap-south-1", "premium", "free", "trial", "banner", "email",
	"cart", "wishlist", "recommendation", "latency", "timeout", "retry", "ok",
	"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "lorem",
	"ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit",
}

// Value builds a JSON object of exactly size bytes, record i's.
func Value(r *rand.Rand, i, size int) []byte {
	v := make([]byte, 0, size)
	v = fmt.Appendf(v, `{"id":%d,"ts":"2025-01-%02dT%02d:%02d:%02d.%03dZ","user":"u-%06d","event":"%s","device":"%s","region":"%s","amount":%d.%02d,"tags":["%s","%s"],"text":"`,
		i, 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000), r.IntN(1_000_000),
		words[r.IntN(8)], words[8+r.IntN(6)], words[14+r.IntN(3)],
		r.IntN(1000), r.IntN(100), words[r.IntN(len(words))], words[r.IntN(len(words))])
	for len(v) < size-2 {
		w := words[r.IntN(len(words))]
		if len(v)+len(w)+1 > size-2 {
			w = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"[:size-2-len(v)]
		} else if len(v) > 0 && v[len(v)-1] != '"' {
			v = append(v, ' ')
		}
		v = append(v, w...)
	}
	return append(v, '"', '}')
}
