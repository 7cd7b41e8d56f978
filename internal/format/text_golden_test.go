package format

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format/formattest"
)

// TestGoldenText pins the exact bytes of csv and bytes on fixed input,
// uncompressed (compressed bytes belong to the compression library).
func TestGoldenText(t *testing.T) {
	full := func(typ, enc string) Options {
		return Options{Type: typ, Fields: formattest.AllFields(), ValueEncoding: enc, Envelope: true, BytesSeparator: DefaultBytesSeparator}
	}
	crlf := full("bytes", "none")
	crlf.BytesSeparator = `\r\n`
	cases := []struct {
		file string
		cfg  Options
		recs []*kgo.Record
	}{
		{"text.csv", full("csv", "none"), formattest.GoldenTextRecords()},
		{"text.bin", full("bytes", "none"), formattest.GoldenTextRecords()},
		{"text-crlf.bin", crlf, formattest.GoldenTextRecords()},
		{"binary-base64.csv", full("csv", "base64"), formattest.GoldenBinaryRecords()},
		{"binary.bin", full("bytes", "none"), formattest.GoldenBinaryRecords()},
		{"binary-base64.bin", full("bytes", "base64"), formattest.GoldenBinaryRecords()},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got := encodeAll(t, tc.cfg, tc.recs...)
			path := filepath.Join("testdata", "golden", tc.file)
			if os.Getenv(formattest.UpdateGoldenEnv) == "1" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with %s=1 to write it)", err, formattest.UpdateGoldenEnv)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Errorf("%s changed:\n got %q\nwant %q\n(if the change is meant, rerun with %s=1 and review the diff)", path, got, want, formattest.UpdateGoldenEnv)
			}
		})
	}
}
