package outside

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/testkit"
)

// PythonAvro returns the path of a Python that imports Debian's python3-avro
// with its snappy and zstandard codecs (python3-snappy, python3-zstandard):
// an Avro reader nobody here wrote. When it is missing the test is skipped,
// or fails if SPILLWAY_TEST_REQUIRE_TOOLS=1 (see missingTool).
func PythonAvro(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, debianPython, "-c", "import avro.datafile, snappy, zstandard").CombinedOutput()
	if err == nil {
		return debianPython
	}
	testkit.MissingTool(t, fmt.Sprintf("python3-avro, python3-snappy or python3-zstandard is not installed for %s (%v: %s)", debianPython, err, bytes.TrimSpace(out)))
	return ""
}

// AvroFile is an Avro container file as python3-avro reads it.
type AvroFile struct {
	Path    string
	Codec   string          // the header's avro.codec, "null" when absent
	Schema  json.RawMessage // the header's avro.schema: the writer's schema
	Records []map[string]any
	// Types maps each field of the first record to the Python type its
	// value decoded to ("str", "bytes", "datetime", "NoneType", ...):
	// the logical types the reader recognized.
	Types map[string]string
}

// pyAvroScript prints one JSON object per file. Bytes become {"b64": ...}
// datetimes (timestamp-millis) their milliseconds since the epoch, dates
// their ISO form and decimals {"decimal": "12.34"}, so that the output is
// JSON and exact.
const pyAvroScript = `
import base64, datetime, decimal, json, sys
from avro.datafile import DataFileReader
from avro.io import DatumReader

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

def plain(v):
    if isinstance(v, bytes):
        return {"b64": base64.b64encode(v).decode()}
    if isinstance(v, datetime.datetime):
        return (v - EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return {"decimal": str(v)}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v

for path in sys.argv[1:]:
    with open(path, "rb") as f:
        r = DataFileReader(f, DatumReader())
        codec = r.meta.get("avro.codec", b"null").decode()
        schema = json.loads(r.meta["avro.schema"].decode())
        recs, types = [], {}
        for rec in r:
            if not recs:
                types = {k: type(v).__name__ for k, v in rec.items()}
            recs.append(plain(rec))
        r.close()
    print(json.dumps({"Path": path, "Codec": codec, "Schema": schema, "Records": recs, "Types": types}))
`

// ReadAvroPython reads the Avro container files at paths with python3-avro
// (see PythonAvro), and fails the test if any of them does not read.
func ReadAvroPython(t testing.TB, paths ...string) []AvroFile {
	t.Helper()
	py := PythonAvro(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-c", pyAvroScript}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3-avro could not read %v: %v\n%s", paths, err, stderr.String())
	}
	var files []AvroFile
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var f AvroFile
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("python3-avro output: %v\n%s", err, out)
		}
		files = append(files, f)
	}
	if len(files) != len(paths) {
		t.Fatalf("python3-avro read %d of %d files\n%s", len(files), len(paths), stderr.String())
	}
	return files
}
