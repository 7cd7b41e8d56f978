package verify

import "testing"

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
