package naming

import (
	"strconv"

	"github.com/spillway/spillway/internal/naming/partvalue"
)

// keyBucket renders {{key_bucket:n=N}}: the bucket Iceberg's bucket(N, key)
// transform gives the record key (partvalue.KeyBucket), so that an Iceberg
// table partitioned by it gets files that each hold one bucket. The null
// key has no bucket: it renders "null", as Iceberg writes a null
// partition value in a path.
type keyBucket struct{ n int }

func newKeyBucket(n int) *keyBucket { return &keyBucket{n: n} }

func (k *keyBucket) bucket(key []byte) int32 { return partvalue.KeyBucket(key, k.n) }

// parseKeyBucket parses the parameter of {{key_bucket:n=N}}.
func parseKeyBucket(src string, off int, whole, key, val string, hasParam bool) (piece, error) {
	if !hasParam || key != "n" {
		return piece{}, errAt(src, off, "bad variable %q at offset %d; {{key_bucket}} needs the number of buckets, such as {{key_bucket:n=16}}", whole, off)
	}
	n, err := strconv.Atoi(val)
	if err != nil || n < 1 || n > partvalue.MaxBuckets || val[0] == '0' {
		return piece{}, errAt(src, off, "bad parameter n=%s in %q at offset %d; the number of buckets must be 1 to %d", val, whole, off, partvalue.MaxBuckets)
	}
	return piece{kind: keyBucketVar, width: n}, nil
}

// Bucket returns key's bucket among the template's N, and false for the
// null key or a template without {{key_bucket}}.
func (t *Template) Bucket(key []byte) (int32, bool) {
	if t.bucket == nil || key == nil {
		return 0, false
	}
	return t.bucket.bucket(key), true
}

func (k *keyBucket) append(b, key []byte) []byte {
	if key == nil {
		return append(b, "null"...)
	}
	// An empty key is a value, not null: it hashes the empty bytes.
	return strconv.AppendInt(b, int64(k.bucket(key)), 10)
}

// keyBucketLens are the lengths of the ways s can start with a rendered
// bucket, longest first: "null", or a number below n without leading
// zeros.
func keyBucketLens(s string, n int) []int {
	if len(s) >= 4 && s[:4] == "null" {
		return []int{4}
	}
	i := 0
	for i < len(s) && i < 10 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	var out []int
	for ; i > 0; i-- {
		if i > 1 && s[0] == '0' {
			continue
		}
		if v, err := strconv.Atoi(s[:i]); err == nil && v < n {
			out = append(out, i)
		}
	}
	return out
}
