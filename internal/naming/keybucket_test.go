package naming

import (
	"testing"

	"github.com/spillway/spillway/internal/naming/partvalue"
)

// TestKeyBucketSpecVectors: {{key_bucket}} gives the Iceberg spec's
// hashes (appendix "Bucket transform details": the string "iceberg" hashes
// to 1210000089, the binary 00 01 02 03 to -188683207). With N = 2^31-1
// the bucket is the hash itself, masked to 31 bits, so this checks the
// hash and the mask, and a small N checks the modulo.
func TestKeyBucketSpecVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  []byte
		n    int
		want int32
	}{
		{[]byte("iceberg"), partvalue.MaxBuckets, 1210000089},
		{[]byte{0, 1, 2, 3}, partvalue.MaxBuckets, -188683207 & (1<<31 - 1)},
		{[]byte("iceberg"), 16, 1210000089 % 16},
		{[]byte{0, 1, 2, 3}, 7, (-188683207 & (1<<31 - 1)) % 7},
		{[]byte{}, 4, 0}, // murmur3 of no bytes is 0
	}
	for _, tt := range tests {
		tmpl, err := Parse("{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:n=" + itoa(tt.n) + "}}")
		if err != nil {
			t.Fatal(err)
		}
		got, ok := tmpl.Bucket(tt.key)
		if !ok || got != tt.want {
			t.Errorf("bucket(%d) of %q = %d, %v; want %d", tt.n, tt.key, got, ok, tt.want)
		}
		name := tmpl.Render(Vars{Topic: "t", Partition: 1, StartOffset: 5, Key: tt.key})
		if want := "t-1-5-" + itoa(int(tt.want)); name != want {
			t.Errorf("rendered %q, want %q", name, want)
		}
		if _, ok := tmpl.Match(name); !ok {
			t.Errorf("%q does not match back", name)
		}
	}
}

func itoa(n int) string { return string(appendNum(nil, int64(n), false, 0)) }

// TestKeyBucketNull: the null key has no bucket and renders "null"; the
// empty key is a value, bucket 0. Records of different buckets are in
// different groups, so in different files.
func TestKeyBucketNull(t *testing.T) {
	t.Parallel()
	tmpl, err := Parse("key_bucket={{key_bucket:n=4}}/{{topic}}-{{partition}}-{{start_offset}}")
	if err != nil {
		t.Fatal(err)
	}
	if !tmpl.SplitsPartition() {
		t.Error("a template with {{key_bucket}} does not split a partition")
	}
	if _, ok := tmpl.Bucket(nil); ok {
		t.Error("the null key has a bucket")
	}
	if got := tmpl.Render(Vars{Topic: "t", Key: nil}); got != "key_bucket=null/t-0-0" {
		t.Errorf("null key: %q", got)
	}
	if got := tmpl.Render(Vars{Topic: "t", Key: []byte{}}); got != "key_bucket=0/t-0-0" {
		t.Errorf("empty key: %q", got)
	}
	groups := map[string]bool{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		groups[tmpl.Group(Vars{Topic: "t", Key: []byte(k)})] = true
	}
	if len(groups) < 2 {
		t.Errorf("8 keys in %d groups", len(groups))
	}
	for _, name := range []string{"key_bucket=4/t-0-0", "key_bucket=03/t-0-0", "key_bucket=/t-0-0", "key_bucket=nul/t-0-0"} {
		if _, ok := tmpl.Match(name); ok {
			t.Errorf("%q matches, though no key renders it", name)
		}
	}
	for _, name := range []string{"key_bucket=3/t-0-0", "key_bucket=null/t-0-0"} {
		if _, ok := tmpl.Match(name); !ok {
			t.Errorf("%q does not match", name)
		}
	}
}

// TestKeyBucketParse: the bucket count is required and positive, and one
// template takes one.
func TestKeyBucketParse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket}}",
		"{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:n=0}}",
		"{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:n=-1}}",
		"{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:n=04}}",
		"{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:m=4}}",
		"{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:n=2147483648}}",
		"{{key_bucket:n=4}}/{{topic}}-{{partition}}-{{start_offset}}-{{key_bucket:n=8}}",
	} {
		if _, err := Parse(s); err == nil {
			t.Errorf("%s parsed", s)
		}
	}
}
