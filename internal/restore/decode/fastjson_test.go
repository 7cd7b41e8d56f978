package decode

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/testkit"
)

// TestFastPathAgrees encodes hostile records with the real jsonl encoder
// and checks that the fast path reads each line as encoding/json does,
// and gives the record back; lines it does not take (escapes, spaces) go
// to encoding/json and come back the same.
func TestFastPathAgrees(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Format
	cfg.Type, cfg.ValueEncoding, cfg.Compression = "jsonl", "base64", "none"
	cfg.Fields = []string{"headers", "timestamp", "offset", "value", "key"} // any order
	var buf bytes.Buffer
	enc, err := formats.NewEncoder(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var want []*kgo.Record
	for i := range 200 {
		r := testkit.HostileRecord(i, 0)
		r.Offset = int64(i)
		if i%13 == 4 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "quote\"back\\slash\ttab\u2028é", Value: []byte("x")})
		}
		want = append(want, r)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	fast := 0
	for i, line := range lines {
		slow, err := jsonEnvelope(line)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		got, err := parseEnvelope(line)
		if err == nil {
			fast++
			if err := testkit.SameRecord(slow, got); err != nil || got.Offset != slow.Offset {
				t.Fatalf("line %d: the fast path reads %v, encoding/json otherwise: %v", i, got, err)
			}
		}
		if err := testkit.SameRecord(want[i], slow); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	if fast < len(lines)*9/10 {
		t.Errorf("the fast path took %d of %d lines", fast, len(lines))
	}
	// Shapes it leaves to encoding/json.
	for _, line := range []string{
		`{"key": null,"value":"","offset":1,"timestamp":2,"headers":[]}`,
		`{"key":null,"value":"\u0041","offset":1,"timestamp":2,"headers":[]}`,
		`{"key":null,"value":"","offset":1.5,"timestamp":2,"headers":[]}`,
		`{"key":null,"value":"","offset":1,"timestamp":2,"headers":[],"extra":1}`,
		`{"key":null,"value":"","timestamp":2,"headers":[]}`,
	} {
		if _, err := parseEnvelope([]byte(line)); err == nil {
			t.Errorf("the fast path took %s", line)
		}
	}
}
