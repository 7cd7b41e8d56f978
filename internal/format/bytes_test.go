package format

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format/formattest"
)

func bytesConfig(sep string) Options {
	return Options{Type: "bytes", Fields: formattest.AllFields(), ValueEncoding: "none", Envelope: true, BytesSeparator: sep}
}

// TestBytesValueAndSeparator: Confluent's ByteArrayFormat, the value as it
// is and then the separator, for every record; nothing else of the record.
func TestBytesValueAndSeparator(t *testing.T) {
	bin := []byte{0x00, 0xff, '\n', 0xfe}
	recs := []*kgo.Record{
		{Offset: 1, Timestamp: formattest.TS, Key: []byte("k"), Value: []byte(`{"a":1}`), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
		{Offset: 2, Value: bin},
		{Offset: 3, Value: nil},      // a tombstone, with errors.null_values: write
		{Offset: 4, Value: []byte{}}, // empty
		{Offset: 5, Value: []byte("a,\"b\"\r")},
	}
	body := []string{`{"a":1}`, string(bin), "", "", "a,\"b\"\r"}
	for _, tc := range []struct {
		sep  string // as configured
		real string // what it means
	}{
		{DefaultBytesSeparator, "\n"},
		{`\r\n`, "\r\n"},
		{"", ""},
		{`\0`, "\x00"},
		{`--\x1e--`, "--\x1e--"},
		{"\n", "\n"}, // a real line break, as YAML's "\n" gives it
	} {
		want := strings.Join(body, tc.real) + tc.real
		if got := encodeAll(t, bytesConfig(tc.sep), recs...); got != want {
			t.Errorf("separator %q: got %q, want %q", tc.sep, got, want)
		}
	}
	// The fields list and the envelope don't change what is written.
	cfg := bytesConfig(`\n`)
	cfg.Fields, cfg.Envelope = []string{"value"}, false
	if got := encodeAll(t, cfg, recs[0]); got != "{\"a\":1}\n" {
		t.Errorf("fields [value]: %q", got)
	}
}

func TestBytesBase64(t *testing.T) {
	cfg := bytesConfig(`\n`)
	cfg.ValueEncoding = "base64"
	bin := []byte{0x00, 0xff, '\n', 0xfe}
	want := base64.StdEncoding.EncodeToString(bin) + "\n\n\n"
	if got := encodeAll(t, cfg, &kgo.Record{Value: bin}, &kgo.Record{}, &kgo.Record{Value: []byte{}}); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// recordingWriter keeps each slice it is handed, to check that a raw value
// goes through uncopied.
type recordingWriter struct{ writes [][]byte }

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, p)
	return len(p), nil
}

// TestBytesLargeValueIsNotCopied: a raw value of any size is handed to the
// writer as it is, so the encoder holds no copy of it.
func TestBytesLargeValueIsNotCopied(t *testing.T) {
	w := &recordingWriter{}
	enc, err := newEncoder(bytesConfig(`\n`), w)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 8<<20)
	if err := enc.Encode(&kgo.Record{Value: big}); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 2 || &w.writes[0][0] != &big[0] || string(w.writes[1]) != "\n" {
		t.Fatalf("writes: %d, first is the value itself: %v", len(w.writes), len(w.writes) > 0 && &w.writes[0][0] == &big[0])
	}
	if b := enc.(*bytesEncoder).out.buf; cap(b) != 0 {
		t.Errorf("encoder holds a %d B buffer", cap(b))
	}
}

func TestBytesWriteErrorIsSticky(t *testing.T) {
	boom := errors.New("disk on fire")
	w := &failWriter{err: boom}
	enc, err := newEncoder(bytesConfig(`\n`), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&kgo.Record{Value: []byte("v")}); !errors.Is(err, boom) || errors.Is(err, ErrRecord) {
		t.Fatalf("err = %v, want the writer's error, not ErrRecord", err)
	}
	if err := enc.Encode(&kgo.Record{Value: []byte("v")}); !errors.Is(err, boom) {
		t.Errorf("second Encode = %v", err)
	}
	if err := enc.Close(); !errors.Is(err, boom) {
		t.Errorf("Close = %v", err)
	}
	if w.writes != 1 {
		t.Errorf("%d writes, want 1", w.writes)
	}
}

func TestBytesConfigErrors(t *testing.T) {
	cfg := bytesConfig(`\q`)
	if _, err := newEncoder(cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `format.bytes_separator "\\q" has an unknown escape \q`) {
		t.Errorf("bad separator: %v", err)
	}
	cfg = bytesConfig(`\n`)
	cfg.ValueEncoding = "hex"
	if _, err := newEncoder(cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `format.value_encoding "hex" is unknown`) {
		t.Errorf("bad encoding: %v", err)
	}
	enc, err := newEncoder(bytesConfig(`\n`), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&kgo.Record{}); err == nil || errors.Is(err, ErrRecord) {
		t.Errorf("Encode after Close = %v, want a non-record error", err)
	}
}
