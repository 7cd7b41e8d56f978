package naming

import "testing"

// TestBytesExtension: .bin as Confluent's format.bytearray.extension, then
// the compression's suffix, as Confluent appends it.
func TestBytesExtension(t *testing.T) {
	for comp, want := range map[string]string{"none": ".bin", "gzip": ".bin.gz", "zstd": ".bin.zst", "snappy": ".bin.snappy"} {
		if got := Extension("bytes", comp); got != want {
			t.Errorf("Extension(bytes, %s) = %q, want %q", comp, got, want)
		}
	}
}

func TestTrimExtKnowsEveryFormat(t *testing.T) {
	for name, want := range map[string]string{
		"t-0-5.jsonl.zst": "t-0-5",
		"t-0-5.csv.gz":    "t-0-5",
		"t-0-5.bin":       "t-0-5",
		"t-0-5.bin.zst":   "t-0-5",
		"t.v1-0-5.avro":   "t.v1-0-5",
		"t-0-5.txt":       "t-0-5.txt",
	} {
		if got := TrimExt(name); got != want {
			t.Errorf("TrimExt(%q) = %q, want %q", name, got, want)
		}
	}
}
