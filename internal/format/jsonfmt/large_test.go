package jsonfmt

import (
	"bytes"
	"errors"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formattest"
)

// largeValues are 40 MiB values in each form a value takes in JSON: embedded
// as is, compacted onto one line, escaped as a string, and base64.
func largeValues(n int) []struct {
	name   string
	enc    string
	value  []byte
	expand float64 // encoded size / value size, about
} {
	var line, pretty, text bytes.Buffer
	line.WriteString(`{"items":[`)
	pretty.WriteString("{\n  \"items\": [\n")
	for i := 0; line.Len() < n; i++ {
		if i > 0 {
			line.WriteByte(',')
			pretty.WriteString(",\n")
		}
		line.WriteString(`{"i":12345,"s":"item \"quoted\" caf\u00e9"}`)
		pretty.WriteString(`    {"i": 12345, "s": "item \"quoted\" café"}`)
	}
	line.WriteString("]}")
	pretty.WriteString("\n  ]\n}\n")
	for text.Len() < n {
		text.WriteString("a line of text with \"quotes\", a back\\slash, a tab\t, café and\u2028 a break\n")
	}
	binary := bytes.Repeat([]byte{0xff, 0x00, 0x80}, n/3)
	return []struct {
		name   string
		enc    string
		value  []byte
		expand float64
	}{
		{"json as is", "none", line.Bytes(), 0.99},
		{"json compacted", "none", pretty.Bytes(), 0.8},
		{"escaped string", "none", text.Bytes(), 1.05},
		{"base64", "base64", binary, 1.3},
	}
}

// TestLargeValueIsNotCopied encodes one record of 40 MiB in each form and
// measures what encoding it costs besides the record itself: the bytes
// allocated, and the live heap above the record's own, at every 4 MiB the
// encoder hands down. A record larger than the budget's room is held over
// the memory limit while it is written (see budget.Plan); writing must not
// add a copy of it, so it is written through in pieces.
func TestLargeValueIsNotCopied(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: skipped with -short and -race (run: go test -run TestLargeValueIsNotCopied -v ./internal/format/)")
	}
	const size = 40 << 20
	for _, v := range largeValues(size) {
		t.Run(strings.ReplaceAll(v.name, " ", "_"), func(t *testing.T) {
			r := &kgo.Record{Key: []byte("k"), Value: v.value, Offset: 7, Timestamp: formattest.TS,
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
			enc, err := newEncoder(formattest.JSONLConfig(v.enc), formattest.Discard{})
			if err != nil {
				t.Fatal(err)
			}
			allocated, extra, written := measureEncode(t, enc, r)
			t.Logf("%-14s value %5.1f MiB, written %5.1f MiB: allocated %7.2f MiB, live heap above the record %7.2f MiB (%.2fx the value)",
				v.name, mib(len(v.value)), mib(int(written)), mib(int(allocated)), mib(int(extra)), float64(extra)/float64(len(v.value)))
			if want := int64(float64(len(v.value)) * v.expand); written < want {
				t.Fatalf("wrote %d bytes, want at least %d", written, want)
			}
			if allocated > 1<<20 {
				t.Errorf("encoding allocated %.1f MiB, want at most 1 MiB: the value is copied", mib(int(allocated)))
			}
			if extra > 1<<20 {
				t.Errorf("the live heap grew %.1f MiB over the record while encoding it, want at most 1 MiB: the value is copied", mib(int(extra)))
			}
		})
	}
}

func mib(n int) float64 { return float64(n) / (1 << 20) }

// measureEncode encodes r once and reports the bytes allocated meanwhile,
// the largest live heap above the one before (which holds r), sampled after
// a collection at every 4 MiB the encoder writes, and the bytes written.
func measureEncode(t *testing.T, enc format.Encoder, r *kgo.Record) (allocated, extra, written int64) {
	t.Helper()
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	read := func() (allocs, live int64) {
		metrics.Read(samples)
		return int64(samples[0].Value.Uint64()), int64(samples[1].Value.Uint64())
	}
	runtime.GC()
	_, base := read()
	w := &peakWriter{every: 4 << 20, sample: func() {
		runtime.GC()
		_, live := read()
		extra = max(extra, live-base)
	}}
	enc.(interface{ setOutput(w *peakWriter) }).setOutput(w)
	allocs0, _ := read()
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	allocs1, _ := read()
	w.sample()
	runtime.KeepAlive(r)
	return allocs1 - allocs0, extra, w.n
}

// peakWriter discards what it is given and calls sample every so many
// bytes, while the encoder still holds what it builds.
type peakWriter struct {
	every, since, n int64
	sample          func()
}

func (w *peakWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	for w.since += int64(len(p)); w.since >= w.every; w.since -= w.every {
		w.sample()
	}
	return len(p), nil
}

// setOutput points a new encoder, which has written nothing, at w.
func (e *jsonlEncoder) setOutput(w *peakWriter) { e.out = format.NewOutput(w, "jsonl") }

// setStream makes enc stream every field of min bytes or more, in pieces of
// piece bytes.
func setStream(enc format.Encoder, min, piece int) {
	switch e := enc.(type) {
	case *jsonlEncoder:
		e.rec.streamMin, e.rec.streamPiece = min, piece
	case *jsonEncoder:
		e.rec.streamMin, e.rec.streamPiece = min, piece
	}
}

// TestStreamedRecordsMatchBuilt writes the same records built whole and
// written through in pieces of every small size, so that pieces cut
// everywhere: inside UTF-8 sequences, escapes, base64 groups, JSON strings
// and whitespace. Both must write the same bytes and report the same record
// errors, and a record error must leave nothing in the output.
func TestStreamedRecordsMatchBuilt(t *testing.T) {
	values := [][]byte{
		nil, {},
		[]byte(`{"a": [1, 2,` + "\n" + ` 3], "s": "x \" \\ y  z", "t":"\\"}`),
		[]byte("[\r\n\t\"a b\" ,\n  {\"k\" : \"v\\\\\" }\n]\n"),
		[]byte(`{"one":"line","n":-1.5e3}`),
		[]byte(" 12345 "), []byte("true"), []byte(`"a JSON string"`),
		[]byte("text with \u2028 and \u2029, é, 😀, \x01\x1f control, \"quotes\" \\ and <html>&"),
		[]byte("\u2028\u2029\u2028"),
		[]byte("ends in a partial\xe2\x80"), // not UTF-8
		{0xff, 0xfe, 0x00},
		[]byte(strings.Repeat("é😀\u2028\"\n", 50)),
	}
	keys := [][]byte{nil, []byte("k"), []byte("kéy\u2028\"")}
	headers := [][]kgo.RecordHeader{nil,
		{{Key: "h", Value: []byte("v")}, {Key: "é", Value: nil}, {Key: "long", Value: []byte(strings.Repeat("x\u2029", 20))}},
		{{Key: "bad", Value: []byte{0xc3}}},
		{{Key: "\xff", Value: []byte("v")}},
	}
	var recs []*kgo.Record
	for i, v := range values {
		for j, k := range keys {
			for l, h := range headers {
				if (i+j+l)%2 == 0 || v == nil || h == nil {
					recs = append(recs, &kgo.Record{Key: k, Value: v, Headers: h, Offset: int64(len(recs)), Timestamp: formattest.TS})
				}
			}
		}
	}
	configs := map[string]config.Format{
		"jsonl":          formattest.JSONLConfig("none"),
		"jsonl base64":   formattest.JSONLConfig("base64"),
		"json":           {Type: "json", Fields: formattest.AllFields(), ValueEncoding: "none", Envelope: true},
		"bare value":     {Type: "jsonl", Fields: []string{"value"}, ValueEncoding: "none"},
		"bare key json":  {Type: "json", Fields: []string{"key"}, ValueEncoding: "base64"},
		"reordered json": {Type: "json", Fields: []string{"headers", "timestamp", "value", "offset", "key"}, ValueEncoding: "none", Envelope: true},
	}
	encode := func(cfg config.Format, min, piece int) (string, []string) {
		var buf bytes.Buffer
		enc, err := newEncoder(cfg, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if min >= 0 {
			setStream(enc, min, piece)
		}
		var errs []string
		for _, r := range recs {
			before := buf.Len()
			if err := enc.Encode(r); err != nil {
				if !errors.Is(err, format.ErrRecord) {
					t.Fatalf("offset %d: %v, want a record error", r.Offset, err)
				}
				if buf.Len() != before {
					t.Fatalf("offset %d: a record error wrote %q", r.Offset, buf.Bytes()[before:])
				}
				errs = append(errs, err.Error())
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.String(), errs
	}
	for name, cfg := range configs {
		built, builtErrs := encode(cfg, -1, 0)
		if name == "jsonl" && (len(builtErrs) == 0 || len(builtErrs) == len(recs)) {
			t.Fatalf("%s: %d record errors of %d records: the corpus should hold both", name, len(builtErrs), len(recs))
		}
		for _, piece := range []int{1, 2, 3, 4, 5, 7, 11, 64, 1 << 20} {
			streamed, streamedErrs := encode(cfg, 0, piece)
			if streamed != built {
				i := 0
				for i < min(len(streamed), len(built)) && streamed[i] == built[i] {
					i++
				}
				t.Fatalf("%s, pieces of %d: streamed output differs from built at byte %d:\nbuilt    %q\nstreamed %q",
					name, piece, i, built[max(0, i-40):min(len(built), i+40)], streamed[max(0, i-40):min(len(streamed), i+40)])
			}
			if !slices.Equal(streamedErrs, builtErrs) {
				t.Fatalf("%s, pieces of %d: record errors differ:\nbuilt    %q\nstreamed %q", name, piece, builtErrs, streamedErrs)
			}
		}
	}
}
