package outside

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/testkit"
)

// debianPython is Debian's interpreter, which sees Debian's python3-snappy;
// another python3 on the PATH (pyenv) would not.
const debianPython = "/usr/bin/python3"

// unsnappyPy decompresses a snappy framed stream (argv[1]) to stdout with
// Debian's python3-snappy, which wraps Google's C++ libsnappy: a decoder
// that shares nothing with the Go writer. Its C helper for CRC-32C fails
// on Debian 12's Python ("PY_SSIZE_T_CLEAN macro must be defined"), while
// the rest works, so only that function is replaced, by a table-driven
// CRC-32C (Castagnoli); every chunk's checksum is still verified.
const unsnappyPy = `import sys
import snappy.snappy as s

_T = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

s._crc32c = crc32c
with open(sys.argv[1], 'rb') as f:
    d = s.StreamDecompressor()
    out = d.decompress(f.read())
    d.flush()
sys.stdout.buffer.write(out)
`

// Unsnappy decompresses the snappy framed file at path with python3-snappy
// (see unsnappyPy) into a new file in a temp dir, and returns its path, for
// readers such as DuckDB that don't read snappy streams. When Debian's
// python3-snappy is missing the test is skipped, or fails if
// SPILLWAY_TEST_REQUIRE_TOOLS=1.
func Unsnappy(t testing.TB, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := exec.CommandContext(ctx, debianPython, "-c", "import snappy").Run(); err != nil {
		testkit.MissingTool(t, fmt.Sprintf("Debian's python3-snappy is not installed (%s -c 'import snappy': %v)", debianPython, err))
		return ""
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, debianPython, "-c", unsnappyPy, path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("outside.Unsnappy(%s): %v\n%s", path, err, stderr.String())
	}
	// The name without .snappy, so that a reader that goes by the extension
	// takes the plain file for what it is.
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".snappy"))
	if err := os.WriteFile(out, stdout.Bytes(), 0o600); err != nil {
		t.Fatalf("outside.Unsnappy: %v", err)
	}
	return out
}

// Decompress returns the content of the file at path, decompressed by its
// last extension with a tool that shares no code with Spillway's writers:
// .gz with gzip -dc, .zst with zstd -dc, .snappy with python3-snappy (see
// Unsnappy); any other file is read as it is. A missing tool skips the test,
// or fails it if SPILLWAY_TEST_REQUIRE_TOOLS=1.
func Decompress(t testing.TB, path string) []byte {
	t.Helper()
	var tool []string
	switch filepath.Ext(path) {
	case ".gz":
		tool = []string{"gzip", "-dc", path}
	case ".zst":
		tool = []string{"zstd", "-dc", path}
	case ".snappy":
		path = Unsnappy(t, path)
	}
	if tool == nil {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("outside.Decompress: %v", err)
		}
		return b
	}
	bin, err := exec.LookPath(tool[0])
	if err != nil {
		testkit.MissingTool(t, fmt.Sprintf("%s is not installed (%v)", tool[0], err))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, tool[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("outside.Decompress: %s: %v\n%s", strings.Join(tool, " "), err, stderr.String())
	}
	return stdout.Bytes()
}
