package format

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/format/formattest"
)

func csvConfig(enc string, fields ...string) Options {
	if len(fields) == 0 {
		fields = formattest.AllFields()
	}
	return Options{Type: "csv", Fields: fields, ValueEncoding: enc, Envelope: true}
}

// TestCSVAivenLayout: the row Aiven's PlainOutputWriter writes for the same
// record: base64 key, raw value, decimal offset, epoch milliseconds,
// formattest.B64(key):formattest.B64(value); per header, no header row.
func TestCSVAivenLayout(t *testing.T) {
	r := &kgo.Record{
		Offset: 123, Timestamp: formattest.TS, Key: []byte("user-1"), Value: []byte("hello"),
		Headers: []kgo.RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "trace", Value: []byte{0xff, 0x00}}},
	}
	want := formattest.B64("user-1") + ",hello,123,1733150000123," + formattest.B64("h1") + ":" + formattest.B64("v1") + ";" + formattest.B64("trace") + ":/wA=;\n"
	if got := encodeAll(t, csvConfig("none"), r); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// base64 changes the value only; the key is base64 either way.
	want = formattest.B64("user-1") + "," + formattest.B64("hello") + ",123\n"
	if got := encodeAll(t, csvConfig("base64", "key", "value", "offset"), r); got != want {
		t.Errorf("base64: got %q, want %q", got, want)
	}
}

func TestCSVFieldsInConfiguredOrder(t *testing.T) {
	r := &kgo.Record{Offset: 9, Partition: 12, Timestamp: formattest.TS, Key: []byte("k"), Value: []byte("v")}
	for _, tc := range []struct {
		fields []string
		want   string
	}{
		{[]string{"offset", "value"}, "9,v\n"},
		{[]string{"timestamp", "offset", "key"}, "1733150000123,9,aw==\n"},
		{[]string{"value"}, "v\n"},
		{[]string{"headers", "value"}, ",v\n"},
		{[]string{"partition", "offset"}, "12,9\n"},
		{[]string{"value", "partition"}, "v,12\n"},
	} {
		if got := encodeAll(t, csvConfig("none", tc.fields...), r); got != tc.want {
			t.Errorf("fields %v: got %q, want %q", tc.fields, got, tc.want)
		}
	}
	// format.envelope means nothing to a csv row.
	cfg := csvConfig("none", "offset", "value")
	cfg.Envelope = false
	if got := encodeAll(t, cfg, r); got != "9,v\n" {
		t.Errorf("without envelope: got %q", got)
	}
}

// TestCSVNullsAndEmpties: a null key or value is an empty field, as Aiven
// writes it; an empty one is "" so that readers can tell them apart. A null
// header value is an empty header value.
func TestCSVNullsAndEmpties(t *testing.T) {
	recs := []*kgo.Record{
		{Offset: 1, Timestamp: formattest.TS},                                 // null key, tombstone
		{Offset: 2, Timestamp: formattest.TS, Key: []byte{}, Value: []byte{}}, // empty key and value
		{Offset: 3, Timestamp: formattest.TS, Headers: []kgo.RecordHeader{{Key: "n"}, {Key: "e", Value: []byte{}}, {Key: ""}}},
	}
	want := ",,1,1733150000123,\n" +
		`"","",2,1733150000123,` + "\n" +
		",,3,1733150000123," + formattest.B64("n") + ":;" + formattest.B64("e") + ":;:;\n"
	for _, enc := range []string{"none", "base64"} {
		if got := encodeAll(t, csvConfig(enc), recs...); got != want {
			t.Errorf("%s: got  %q\nwant %q", enc, got, want)
		}
	}
	// A record without a timestamp (Kafka's -1) shows -1, as in jsonl.
	if got := encodeAll(t, csvConfig("none", "timestamp"), &kgo.Record{Timestamp: time.UnixMilli(-1)}); got != "-1\n" {
		t.Errorf("no timestamp: got %q", got)
	}
	// One field: a null is an empty line, an empty value "".
	if got := encodeAll(t, csvConfig("none", "value"), recs[0], recs[1]); got != "\n\"\"\n" {
		t.Errorf("value alone: got %q", got)
	}
}

// TestCSVQuoting: raw values are quoted exactly as encoding/csv's writer
// quotes them, and encoding/csv's reader gives them back.
func TestCSVQuoting(t *testing.T) {
	values := []string{
		"plain", "a,b", `say "hi"`, "line\nbreak", "cr\rlf", "crlf\r\n", " leading space", "\tleading tab",
		"trailing space ", `\.`, `\.x`, "é日本\U0001F600", "\u2028", `"`, ",", "\u00a0nbsp first", "{\"json\": [1, 2]}",
	}
	for i, v := range values {
		r := &kgo.Record{Offset: int64(i), Value: []byte(v)}
		got := encodeAll(t, csvConfig("none", "offset", "value"), r)
		if want := encodingCSV(t, []string{strconv.Itoa(i), v}); got != want {
			t.Errorf("value %q: got %q, encoding/csv writes %q", v, got, want)
		}
		rd := csv.NewReader(strings.NewReader(got))
		row, err := rd.Read()
		if err != nil {
			t.Fatalf("value %q: encoding/csv can't read %q: %v", v, got, err)
		}
		// encoding/csv's reader drops a CR before LF, even inside quotes.
		if want := strings.ReplaceAll(v, "\r\n", "\n"); len(row) != 2 || row[1] != want {
			t.Errorf("value %q: read back %q", v, row)
		}
	}
}

// encodingCSV is encoding/csv's writer's output for one row.
func encodingCSV(t testing.TB, row []string) string {
	t.Helper()
	var b strings.Builder
	w := csv.NewWriter(&b)
	if err := w.Write(row); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func FuzzCSVValueMatchesEncodingCSV(f *testing.F) {
	for _, s := range []string{"x", "a,b", "\"", "\r\n", " x", `\.`, "\u3000x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if v == "" || !utf8.ValidString(v) {
			return // "" is written as a quoted empty field on purpose; invalid UTF-8 is a record error
		}
		got := string(appendCSVText(nil, []byte(v))) + "\n"
		if want := encodingCSV(t, []string{v}); got != want {
			t.Fatalf("value %q: got %q, encoding/csv writes %q", v, got, want)
		}
	})
}

func TestCSVRecordError(t *testing.T) {
	bad := []byte{'o', 'k', ',', 0xff}
	var buf bytes.Buffer
	enc, err := newEncoder(csvConfig("none"), &buf)
	if err != nil {
		t.Fatal(err)
	}
	err = enc.Encode(&kgo.Record{Offset: 17, Key: []byte("k"), Value: bad})
	if !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), "value at offset 17 is not valid UTF-8; set format.value_encoding: base64") {
		t.Fatalf("err = %v, want ErrRecord naming base64", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("failed record left %q in the output", buf.String())
	}
	// The encoder stays usable; binary keys and header values are base64
	// and never an error.
	ok := &kgo.Record{Offset: 18, Timestamp: formattest.TS, Key: bad, Value: []byte("fine"), Headers: []kgo.RecordHeader{{Key: "b", Value: bad}}}
	if err := enc.Encode(ok); err != nil {
		t.Fatalf("Encode after record error: %v", err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "b2ss/w==,fine,18,1733150000123,Yg==:b2ss/w==;\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	// With base64 the same value is written.
	if got := encodeAll(t, csvConfig("base64", "value"), &kgo.Record{Value: bad}); got != base64.StdEncoding.EncodeToString(bad)+"\n" {
		t.Errorf("base64: %q", got)
	}
}

func TestCSVWriteErrorIsSticky(t *testing.T) {
	boom := errors.New("disk on fire")
	w := &failWriter{err: boom}
	enc, err := newEncoder(csvConfig("none"), w)
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
	if err := enc.Encode(&kgo.Record{}); err == nil {
		t.Error("Encode after Close succeeded")
	}
}

func TestCSVConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Options
		want string
	}{
		{Options{Type: "csv"}, "format.fields is empty"},
		{csvConfig("none", "value", "topic"), `unknown field "topic"`},
		{csvConfig("none", "value", "value"), `field "value" is listed twice`},
		{csvConfig("hex"), `format.value_encoding "hex" is unknown`},
	} {
		if _, err := newEncoder(tc.cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newEncoder(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestCSVLargeRecordBufferIsNotRetained(t *testing.T) {
	enc, err := newEncoder(csvConfig("none"), formattest.Discard{})
	if err != nil {
		t.Fatal(err)
	}
	out := &enc.(*csvEncoder).out
	if err := enc.Encode(&kgo.Record{Value: bytes.Repeat([]byte("x,"), 1<<19)}); err != nil {
		t.Fatal(err)
	}
	if cap(out.buf) > MaxRetainedBuffer {
		t.Errorf("encoder kept a %d B buffer after a 1 MiB record", cap(out.buf))
	}
}

func BenchmarkCSV(b *testing.B) {
	text := bytes.Repeat([]byte("lorem ipsum \"dolor\", sit amet\n"), 40)[:1024]
	for _, bc := range []struct {
		name  string
		enc   string
		value []byte
	}{
		{"json_value", "none", formattest.JSONValue(1024)},
		{"quoted_text", "none", text},
		{"base64_value", "base64", text},
	} {
		b.Run(bc.name, func(b *testing.B) {
			enc, err := newEncoder(csvConfig(bc.enc), formattest.Discard{})
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
