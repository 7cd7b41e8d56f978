package partvalue

import (
	"math"

	"github.com/twmb/murmur3"
)

// KeyBucket is the bucket Iceberg's bucket(n, key) transform gives the
// bytes of a record key: the spec's (murmur3_x86_32(key) &
// Integer.MAX_VALUE) % n, for n from 1 to MaxBuckets. The hash is
// Iceberg's, not one of our own: a bucket that differs from what every
// engine computes would make them skip the file a key is in. The key
// column holds the key's bytes, as a binary or a string column, and both
// hash the same bytes. The null key has no bucket (Iceberg writes a null
// partition value); the caller tells it apart.
//
// The hash is the murmur3 package iceberg-go's BucketTransform calls, and
// the bucket its formula; package iceberg's tests check the two agree on
// every key they try. Importing iceberg-go here instead would link it
// (its catalogs and FileIO's cloud SDKs) into package storage and
// format/formattest, and their tests, which do without it now.
func KeyBucket(key []byte, n int) int32 {
	return (int32(murmur3.Sum32(key)) & math.MaxInt32) % int32(n)
}
