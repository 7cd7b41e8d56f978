package formats

import (
	"bytes"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var fixedSync = [16]byte{'s', 'p', 'i', 'l', 'l', 'w', 'a', 'y', '-', 's', 'y', 'n', 'c', '-', '1', '6'}

// syncOf is an avro file's sync marker: its last 16 bytes.
func syncOf(file []byte) [16]byte {
	var s [16]byte
	copy(s[:], file[len(file)-16:])
	return s
}

// withSync is an avro file with its sync marker, random and not
// settable from outside the avro package, replaced by sync: the marker
// is the file's last 16 bytes and recurs only after the header and each
// block, so the result is the file an encoder given sync writes, for the
// golden files.
func withSync(file []byte, sync [16]byte) []byte {
	old := syncOf(file)
	return bytes.ReplaceAll(file, old[:], sync[:])
}
