package jsonfmt

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// encodeAll encodes recs with this package's encoders and closes the
// encoder, failing on any error.
func encodeAll(t *testing.T, cfg config.Format, recs ...*kgo.Record) string {
	t.Helper()
	encode := func(c config.Format, w io.Writer) (formattest.Encoder, error) { return newEncoder(c, w) }
	return formattest.EncodeAll(t, encode, cfg, recs...)
}

// str returns s as a JSON string, the form a field is expected in.
func str(s string) string { return marshalString(s) }

func TestJSONLEnvelope(t *testing.T) {
	binary := []byte{0xff, 0x00, 0xfe, 'a'}
	recs := []*kgo.Record{
		{Offset: 1, Timestamp: formattest.TS, Key: []byte(`{"id":1}`), Value: []byte(`{"a":[1,2,{"b":null}],"s":"x"}`)},
		{Offset: 2, Timestamp: formattest.TS, Key: []byte("plain key"), Value: []byte("hello \"world\"\n\ttab <&> \u2028 é 日本")},
		{Offset: 3, Timestamp: formattest.TS, Key: nil, Value: nil},
		{Offset: 4, Timestamp: formattest.TS, Key: []byte{}, Value: []byte{}},
		{Offset: 5, Timestamp: formattest.TS, Value: []byte("42"), Headers: []kgo.RecordHeader{
			{Key: "h", Value: []byte("v")}, {Key: "json", Value: []byte(`{"x":1}`)}, {Key: "nil", Value: nil},
		}},
		{Offset: 6, Timestamp: formattest.TS, Value: []byte(" \"a JSON string\" ")},
	}
	lines := formattest.DecodeLines(t, encodeAll(t, formattest.JSONLConfig("none"), recs...))
	if len(lines) != len(recs) {
		t.Fatalf("got %d lines, want %d", len(lines), len(recs))
	}
	want := []struct{ key, value string }{
		{str(`{"id":1}`), `{"a":[1,2,{"b":null}],"s":"x"}`}, // keys stay strings, JSON values are embedded
		{str("plain key"), str("hello \"world\"\n\ttab <&> \u2028 é 日本")},
		{"null", "null"},
		{`""`, `""`},
		{"null", "42"},
		{"null", `"a JSON string"`},
	}
	for i, l := range lines {
		r := recs[i]
		if got := string(l.Key); got != want[i].key {
			t.Errorf("offset %d key = %s, want %s", r.Offset, got, want[i].key)
		}
		if got := compact(t, l.Value); got != want[i].value {
			t.Errorf("offset %d value = %s, want %s", r.Offset, got, want[i].value)
		}
		if l.Offset == nil || *l.Offset != r.Offset {
			t.Errorf("offset %d: offset field = %v", r.Offset, l.Offset)
		}
		if l.Timestamp == nil || *l.Timestamp != 1733150000123 {
			t.Errorf("offset %d: timestamp field = %v, want 1733150000123", r.Offset, l.Timestamp)
		}
		if len(l.Headers) != len(r.Headers) {
			t.Fatalf("offset %d: %d headers, want %d", r.Offset, len(l.Headers), len(r.Headers))
		}
	}
	h := lines[4].Headers
	for i, w := range []struct{ key, value string }{{"h", `"v"`}, {"json", str(`{"x":1}`)}, {"nil", "null"}} {
		if h[i].Key != w.key || string(h[i].Value) != w.value {
			t.Errorf("header %d = %s:%s, want %s:%s", i, h[i].Key, h[i].Value, w.key, w.value)
		}
	}
	// binary: the key is decoded back to the exact bytes.
	lines = formattest.DecodeLines(t, encodeAll(t, formattest.JSONLConfig("base64"), &kgo.Record{
		Offset: 7, Key: binary, Value: binary, Headers: []kgo.RecordHeader{{Key: "b", Value: binary}, {Key: "n"}},
	}))
	for name, raw := range map[string]json.RawMessage{"key": lines[0].Key, "value": lines[0].Value, "header": lines[0].Headers[0].Value} {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s %s: %v", name, raw, err)
		}
		if got, err := base64.StdEncoding.DecodeString(s); err != nil || !bytes.Equal(got, binary) {
			t.Errorf("%s = %q (%v), want base64 of %x", name, s, err, binary)
		}
	}
	if got := string(lines[0].Headers[1].Value); got != "null" {
		t.Errorf("nil header value with base64 = %s, want null", got)
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

func TestJSONLExactBytes(t *testing.T) {
	out := encodeAll(t, formattest.JSONLConfig("none"), &kgo.Record{
		Offset: 123, Timestamp: formattest.TS, Key: []byte("k"), Value: []byte(`{"a":1}`),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}},
	})
	want := `{"key":"k","value":{"a":1},"offset":123,"timestamp":1733150000123,"headers":[{"key":"h","value":"v"}]}` + "\n"
	if out != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestJSONLFieldsSubsetAndOrder(t *testing.T) {
	cfg := config.Format{Type: "jsonl", Fields: []string{"offset", "value"}, Envelope: true}
	out := encodeAll(t, cfg, &kgo.Record{Offset: 9, Partition: 12, Key: []byte("k"), Value: []byte("v")})
	if want := `{"offset":9,"value":"v"}` + "\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	// The Kafka partition, when listed; a value large enough to be
	// streamed takes the other path.
	cfg.Fields = []string{"partition", "offset", "value"}
	big := strings.Repeat("x", 100<<10)
	out = encodeAll(t, cfg, &kgo.Record{Offset: 9, Partition: 12, Value: []byte("v")}, &kgo.Record{Offset: 10, Partition: 12, Value: []byte(big)})
	if want := `{"partition":12,"offset":9,"value":"v"}` + "\n" + `{"partition":12,"offset":10,"value":"` + big + `"}` + "\n"; out != want {
		t.Errorf("with partition: got %.200q, want %.200q", out, want)
	}
	cfg.Type = "json"
	out = encodeAll(t, cfg, &kgo.Record{Offset: 9, Partition: 3, Value: []byte("v")})
	if !strings.Contains(out, `{"partition":3,"offset":9,"value":"v"}`) {
		t.Errorf("json with partition: got %q", out)
	}
}

func TestJSONLPrettyValueStaysOnOneLine(t *testing.T) {
	pretty := "{\n  \"a\": 1,\r\n  \"b\": \"x y\"\n}\n"
	out := encodeAll(t, formattest.JSONLConfig("none"), &kgo.Record{Value: []byte(pretty)}, &kgo.Record{Offset: 1, Value: []byte("1")})
	lines := formattest.DecodeLines(t, out)
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(lines), out)
	}
	if got := string(lines[0].Value); got != `{"a":1,"b":"x y"}` {
		t.Errorf("value = %s", got)
	}
}

func TestJSONLNoEnvelope(t *testing.T) {
	r := &kgo.Record{Offset: 5, Timestamp: formattest.TS, Key: []byte("k\n"), Value: []byte(`{"a":1}`),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
	text := &kgo.Record{Offset: 6, Timestamp: formattest.TS, Value: []byte("plain")}
	for _, tc := range []struct {
		field string
		recs  []*kgo.Record
		want  string
	}{
		{"value", []*kgo.Record{r, text}, "{\"a\":1}\n\"plain\"\n"},
		{"key", []*kgo.Record{r, text}, "\"k\\n\"\nnull\n"},
		{"offset", []*kgo.Record{r}, "5\n"},
		{"timestamp", []*kgo.Record{r}, "1733150000123\n"},
		{"headers", []*kgo.Record{r, text}, "[{\"key\":\"h\",\"value\":\"v\"}]\n[]\n"},
	} {
		cfg := config.Format{Type: "jsonl", Fields: []string{tc.field}, Envelope: false}
		if got := encodeAll(t, cfg, tc.recs...); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.field, got, tc.want)
		}
	}
}

func TestRecordErrorWritesNothing(t *testing.T) {
	bad := []byte{'o', 'k', 0xff}
	for _, tc := range []struct {
		name string
		rec  *kgo.Record
		want string
	}{
		{"value", &kgo.Record{Offset: 17, Value: bad}, "value at offset 17 is not valid UTF-8; set format.value_encoding: base64"},
		{"key", &kgo.Record{Offset: 18, Key: bad, Value: []byte("v")}, "key at offset 18 is not valid UTF-8"},
		{"header value", &kgo.Record{Offset: 19, Headers: []kgo.RecordHeader{{Key: "ok", Value: []byte("x")}, {Key: "h", Value: bad}}},
			`value of header "h" at offset 19 is not valid UTF-8`},
		{"header key", &kgo.Record{Offset: 20, Headers: []kgo.RecordHeader{{Key: string(bad)}}}, "header key"},
	} {
		for _, typ := range []string{"jsonl", "json"} {
			var buf bytes.Buffer
			cfg := formattest.JSONLConfig("none")
			cfg.Type = typ
			enc, err := newEncoder(cfg, &buf)
			if err != nil {
				t.Fatal(err)
			}
			err = enc.Encode(tc.rec)
			if !errors.Is(err, format.ErrRecord) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s/%s: err = %v, want format.ErrRecord containing %q", typ, tc.name, err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("%s/%s: failed record left %q in the output", typ, tc.name, buf.String())
			}
			// The encoder stays usable and the file valid.
			if err := enc.Encode(&kgo.Record{Offset: 21, Value: []byte("fine")}); err != nil {
				t.Fatalf("%s/%s: Encode after record error: %v", typ, tc.name, err)
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			if typ == "json" {
				var arr []formattest.Line
				if err := json.Unmarshal(buf.Bytes(), &arr); err != nil || len(arr) != 1 {
					t.Errorf("json/%s: output %q: %v", tc.name, buf.String(), err)
				}
			} else if n := len(formattest.DecodeLines(t, buf.String())); n != 1 {
				t.Errorf("jsonl/%s: %d lines, want 1", tc.name, n)
			}
		}
	}
}

type failWriter struct {
	err    error
	writes int
}

func (w *failWriter) Write(p []byte) (int, error) { w.writes++; return 0, w.err }

func TestWriteErrorIsNotRecordError(t *testing.T) {
	for _, typ := range []string{"jsonl", "json"} {
		boom := errors.New("disk on fire")
		w := &failWriter{err: boom}
		cfg := formattest.JSONLConfig("none")
		cfg.Type = typ
		enc, err := newEncoder(cfg, w)
		if err != nil {
			t.Fatal(err)
		}
		err = enc.Encode(&kgo.Record{Value: []byte("v")})
		if !errors.Is(err, boom) || errors.Is(err, format.ErrRecord) {
			t.Fatalf("%s: err = %v, want the writer's error, not format.ErrRecord", typ, err)
		}
		// Sticky: the file is broken; nothing more is written.
		if err2 := enc.Encode(&kgo.Record{Value: []byte("v")}); !errors.Is(err2, boom) {
			t.Errorf("%s: second Encode = %v, want the first error", typ, err2)
		}
		if err := enc.Close(); !errors.Is(err, boom) {
			t.Errorf("%s: Close = %v, want the first error", typ, err)
		}
		if w.writes != 1 {
			t.Errorf("%s: %d writes after failure, want 1 in total", typ, w.writes)
		}
	}
}

func TestEncodeAfterClose(t *testing.T) {
	enc, err := newEncoder(formattest.JSONLConfig("none"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&kgo.Record{}); err == nil || errors.Is(err, format.ErrRecord) {
		t.Errorf("Encode after Close = %v, want a non-record error", err)
	}
}

func TestJSONArray(t *testing.T) {
	cfg := formattest.JSONLConfig("none")
	cfg.Type = "json"
	if got := encodeAll(t, cfg); got != "[]\n" {
		t.Errorf("empty file = %q, want []", got)
	}
	out := encodeAll(t, cfg,
		&kgo.Record{Offset: 1, Value: []byte(`{"a":1}`)},
		&kgo.Record{Offset: 2, Value: []byte("text")},
		&kgo.Record{Offset: 3})
	var arr []formattest.Line
	if err := json.Unmarshal([]byte(out), &arr); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if len(arr) != 3 || string(arr[0].Value) != `{"a":1}` || string(arr[1].Value) != `"text"` || string(arr[2].Value) != "null" || *arr[2].Offset != 3 {
		t.Errorf("decoded %+v from %q", arr, out)
	}
	// Closing twice writes the trailer once.
	var buf bytes.Buffer
	enc, _ := newEncoder(cfg, &buf)
	_ = enc.Encode(&kgo.Record{})
	_ = enc.Close()
	if err := enc.Close(); err != nil || strings.Count(buf.String(), "\n]\n") != 1 {
		t.Errorf("second Close: %v, output %q", err, buf.String())
	}
}

// marshalString is encoding/json's string encoding, minus HTML escaping.
func marshalString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	var all strings.Builder
	for c := rune(0); c < 0x80; c++ {
		all.WriteRune(c)
	}
	for _, s := range []string{"", "plain", all.String(), "\u2028\u2029 \u2027\u202a", "é日本\U0001F600", "\x7f", `\"`, "a\u2028"} {
		if got, want := string(appendString(nil, s)), marshalString(s); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(appendString(nil, []byte(s))), marshalString(s); got != want {
			t.Errorf("appendString([]byte %q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c\n\x00\x1f", "\u2028", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // callers reject these before escaping
		}
		if got, want := string(appendString(nil, s)), marshalString(s); got != want {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func BenchmarkJSONL(b *testing.B) {
	text := bytes.Repeat([]byte("lorem ipsum \"dolor\" sit amet\n"), 40)[:1024]
	bin := make([]byte, 1024)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	for _, bc := range []struct {
		name  string
		enc   string
		value []byte
	}{
		{"json_value", "none", formattest.JSONValue(1024)},
		{"text_value", "none", text},
		{"base64_value", "base64", bin},
	} {
		b.Run(bc.name, func(b *testing.B) {
			enc, err := newEncoder(formattest.JSONLConfig(bc.enc), formattest.Discard{})
			if err != nil {
				b.Fatal(err)
			}
			r := formattest.BenchRecord(bc.value)
			b.SetBytes(int64(len(bc.value)))
			b.ReportAllocs()
			for b.Loop() {
				if err := enc.Encode(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestTextThatLooksLikeJSONStaysAString(t *testing.T) {
	for _, v := range []string{"123 apples", "nullable", "true story", "{not json}", "[1,2", `"half`, "-", "1e", "  "} {
		cfg := config.Format{Type: "jsonl", Fields: []string{"value"}}
		if got, want := encodeAll(t, cfg, &kgo.Record{Value: []byte(v)}), str(v)+"\n"; got != want {
			t.Errorf("value %q written as %s, want %s", v, got, want)
		}
	}
}

func TestLargeRecordBufferIsNotRetained(t *testing.T) {
	enc, err := newEncoder(formattest.JSONLConfig("none"), formattest.Discard{})
	if err != nil {
		t.Fatal(err)
	}
	out := &enc.(*jsonlEncoder).out
	if err := enc.Encode(&kgo.Record{Value: bytes.Repeat([]byte("x"), 1<<20)}); err != nil {
		t.Fatal(err)
	}
	if cap(out.Buf()) > format.MaxRetainedBuffer {
		t.Errorf("encoder kept a %d B buffer after a 1 MiB record", cap(out.Buf()))
	}
	if err := enc.Encode(&kgo.Record{Value: []byte("small")}); err != nil {
		t.Fatal(err)
	}
	if cap(out.Buf()) == 0 || cap(out.Buf()) > format.MaxRetainedBuffer {
		t.Errorf("encoder buffer cap %d after a small record", cap(out.Buf()))
	}
}

// newEncoder is formats.NewEncoder for the JSON formats, which this
// package's tests cover (package formats imports this one, so its table
// can't be used here).
func newEncoder(cfg config.Format, w io.Writer) (format.Encoder, error) {
	for _, k := range []format.Kind{JSONL(), JSON()} {
		if k.Name == cfg.Type {
			return k.NewEncoder(cfg, w)
		}
	}
	return nil, fmt.Errorf("format.type %q is not a JSON format", cfg.Type)
}
