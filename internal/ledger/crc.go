package ledger

import "fmt"

// FormatCRC32C is how a ledger entry writes a file's CRC-32C: eight
// lowercase hex digits, as crc32c tools print it. (S3 and GCS show the
// same four bytes, big-endian, in base64, and only for an object uploaded
// in one part: a multipart upload's checksum is of its parts' checksums.)
func FormatCRC32C(sum uint32) string { return fmt.Sprintf("%08x", sum) }

func validCRC32C(s string) bool {
	if len(s) != 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
