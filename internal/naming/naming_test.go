package naming

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const defaultTemplate = "{{topic}}-{{partition}}-{{start_offset}}"

func mustParse(t testing.TB, s string) *Template {
	t.Helper()
	tpl, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return tpl
}

func TestRender(t *testing.T) {
	ts := time.Date(2024, 3, 7, 5, 9, 0, 0, time.FixedZone("CET", 3600)) // 04:09 UTC
	v := Vars{Topic: "a-b.c", Partition: 7, StartOffset: 1234, Time: ts}
	for _, tc := range []struct{ tpl, want string }{
		{defaultTemplate, "a-b.c-7-1234"},
		{"{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}", "a-b.c/0000000007/00000000000000001234"},
		{"{{topic}}-{{partition:padding=false}}-{{start_offset:padding=false}}", "a-b.c-7-1234"},
		{"y={{timestamp:unit=yyyy}}/m={{timestamp:unit=MM}}/d={{timestamp:unit=dd}}/h={{timestamp:unit=HH}}/{{topic}}-{{partition}}-{{start_offset}}",
			"y=2024/m=03/d=07/h=04/a-b.c-7-1234"},
		{"{{ topic }}+{{partition}}+{{start_offset}}", "a-b.c+7+1234"},
		{"x{y}z/{{topic}}{{partition}}{{start_offset}}", "x{y}z/a-b.c71234"},
		{"{{topic}}-{{partition}}-{{start_offset}}-{{start_offset:padding=true}}", "a-b.c-7-1234-00000000000000001234"},
	} {
		if got := mustParse(t, tc.tpl).Render(v); got != tc.want {
			t.Errorf("%s: Render = %q, want %q", tc.tpl, got, tc.want)
		}
	}
}

func TestRenderLimits(t *testing.T) {
	tpl := mustParse(t, "{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}")
	got := tpl.Render(Vars{Topic: "t", Partition: 1<<31 - 1, StartOffset: 1<<63 - 1})
	if want := "t/2147483647/09223372036854775807"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		tpl    string
		want   string // substring of the message
		offset int
	}{
		{"", "template is empty", 0},
		{"abc{{bogus}}", `unknown variable "{{bogus}}" at offset 3; known: topic, partition, start_offset, timestamp, key, key_bucket`, 3},
		{"{{topic}}-{{partition}-{{start_offset}}", `unknown variable "{{partition}-{{start_offset}}" at offset 10`, 10},
		{"{{topic}}-{{partition}}-{{start_offset", `unclosed "{{" at offset 24`, 24},
		{"{{topic}}-{{}}-{{partition}}-{{start_offset}}", `empty variable "{{}}" at offset 10`, 10},
		{"{{topic}}-{{ }}", `empty variable "{{ }}" at offset 10`, 10},
		{"{{topic}}-{{partition:padding=yes}}-{{start_offset}}", `bad parameter "padding=yes" in "{{partition:padding=yes}}" at offset 10; padding must be true, false or a width`, 10},
		{"{{topic}}-{{partition:padding}}-{{start_offset}}", `bad parameter "padding"`, 10},
		{"{{topic}}-{{partition:pad=true}}-{{start_offset}}", `takes only padding=true, padding=false or padding=N`, 10},
		{"{{topic:padding=true}}-{{partition}}-{{start_offset}}", `{{topic}} takes no parameters`, 0},
		{"{{topic}}-{{partition}}-{{start_offset}}-{{timestamp}}", `needs unit=yyyy`, 41},
		{"{{topic}}-{{partition}}-{{start_offset}}-{{timestamp:unit=mm}}", `unit must be yyyy, MM, dd or HH`, 41},
		{"{{topic}}-{{key:padding=true}}-{{start_offset}}", `bad parameter "padding=true" in "{{key:padding=true}}" at offset 10; {{key}} takes no parameters`, 10},
		// {{key}} with {{start_offset}} is an ordinary template: it needs
		// topic and partition as well.
		{"{{topic}}-{{key}}-{{start_offset}}", "template has no {{partition}}", 34},
		{"{{key}}-{{start_offset}}", "template has no {{topic}}", 24},
		// Without {{key}} and {{start_offset}}, files share names.
		{"{{topic}}/{{partition}}/{{timestamp:unit=HH}}", "template has no {{start_offset}}: without it two files get the same name", 45},
		// A key runs into a neighbour with nothing, or only digits, between.
		{"{{topic}}-{{partition}}-{{key}}{{start_offset}}", `{{key}} at offset 24 has nothing between it and {{start_offset}} at offset 31; a key can begin or end with what that variable writes`, 24},
		{"{{topic}}-{{partition}}-{{start_offset}}{{ key }}", `{{key}} at offset 40 has nothing between it and {{start_offset}} at offset 24`, 40},
		{"{{topic}}-{{partition}}-{{key}}12{{start_offset}}", `{{key}} at offset 24 has only digits between it and {{start_offset}} at offset 33`, 24},
		{"{{topic}}/{{partition}}/{{timestamp:unit=HH}}0{{key}}", `{{key}} at offset 46 has only digits between it and {{timestamp:unit=HH}} at offset 24`, 46},
		{"{{key}}{{topic}}", `{{key}} at offset 0 has nothing between it and {{topic}} at offset 7`, 0},
		{"{{key}}{{key}}", `{{key}} at offset 0 has nothing between it and {{key}} at offset 7`, 0},
		{"{{topic}}}}-{{partition}}-{{start_offset}}", `stray "}}" at offset 9`, 9},
		{"}}", `stray "}}" at offset 0`, 0},
		{"{{topic}}-{{start_offset}}", "template has no {{partition}}", 26},
		{"{{partition}}-{{start_offset}}", "template has no {{topic}}", 30},
		{"{{topic}}-{{partition}}", "template has no {{start_offset}}", 23},
		{"/" + defaultTemplate, `starts with "/"`, 0},
		{"../" + defaultTemplate, `path segment ".." at offset 0`, 0},
		{"a/../" + defaultTemplate, `path segment ".." at offset 2`, 2},
		{"./" + defaultTemplate, `path segment "." at offset 0`, 0},
		{"{{topic}}/../{{partition}}-{{start_offset}}", `path segment ".." at offset 10`, 10},
		{"a//" + defaultTemplate, `empty path segment ("//" or a trailing "/") at offset 1`, 1},
		{defaultTemplate + "/", `empty path segment`, len(defaultTemplate)},
	} {
		_, err := Parse(tc.tpl)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want a *ParseError", tc.tpl, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error\n  %v\nwant it to contain\n  %s", tc.tpl, err, tc.want)
		}
		if pe.Offset != tc.offset {
			t.Errorf("Parse(%q) error offset = %d, want %d", tc.tpl, pe.Offset, tc.offset)
		}
	}
}

func TestParseAcceptsSafeDots(t *testing.T) {
	// Dots are fine inside a segment; only whole "." and ".." segments are not.
	for _, s := range []string{
		"..a/" + defaultTemplate,
		"a../" + defaultTemplate,
		"./{{topic}}/{{partition}}-{{start_offset}}"[2:],
		".{{topic}}/..{{partition}}-{{start_offset}}",
		"{{topic}}/{{partition}}/{{start_offset}}..x",
		"a}b{c/" + defaultTemplate,
	} {
		if _, err := Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
}

func TestString(t *testing.T) {
	s := "{{ topic }}/{{partition:padding=true}}/{{start_offset}}"
	if got := mustParse(t, s).String(); got != s {
		t.Errorf("String() = %q, want %q", got, s)
	}
}

func TestMatchRoundTrip(t *testing.T) {
	templates := []string{
		defaultTemplate,
		"{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}",
		"{{topic}}-{{partition:padding=true}}-{{start_offset:padding=true}}",
		"{{topic}}/{{partition}}/{{start_offset}}",
		"{{timestamp:unit=yyyy}}/{{timestamp:unit=MM}}/{{timestamp:unit=dd}}/{{timestamp:unit=HH}}/{{topic}}-{{partition}}-{{start_offset}}",
		"{{topic}}-{{partition}}-{{start_offset}}-{{timestamp:unit=yyyy}}{{timestamp:unit=MM}}{{timestamp:unit=dd}}",
		"{{topic}}.{{partition}}.{{start_offset}}",
		"{{topic}}_{{partition}}_{{start_offset}}",
		"{{topic}}/{{partition}}/{{key}}/{{start_offset}}",
		"{{key}}/{{topic}}.{{partition}}.{{start_offset}}",
		hiveKeyTemplate,
	}
	topics := []string{"a", "a-b.c", "a-1", "a-1-2", "a.b.c", "x_y", "-", "--", "...", "9", "T0p1c-9.9_"}
	keys := [][]byte{nil, {}, []byte("k"), []byte("1-2"), []byte("a.b-c"), []byte("null")}
	var vars []Vars
	for i, topic := range topics {
		for _, p := range []int32{0, 1, 9, 10, 12, 1<<31 - 1} {
			for _, o := range []int64{0, 1, 10, 99, 1234567, 1<<63 - 1} {
				vars = append(vars, Vars{Topic: topic, Partition: p, StartOffset: o,
					Time: time.Date(2024, 12, 31, 23, 0, 0, 0, time.UTC), Key: keys[(i+int(p)+int(o%7))%len(keys)]})
			}
		}
	}
	for _, s := range templates {
		tpl := mustParse(t, s)
		for _, v := range vars {
			name := tpl.Render(v)
			got, ok := tpl.Match(name)
			if !ok || got.Topic != v.Topic || got.Partition != v.Partition || got.StartOffset != v.StartOffset ||
				(tpl.hasKey && !sameKey(got.Key, v.Key)) {
				t.Errorf("%s: Match(%q) = %+v, %v; want %q/%d/%d/%q", s, name, got, ok, v.Topic, v.Partition, v.StartOffset, v.Key)
			}
			off, ok := tpl.MatchPartition(name, v.Topic, v.Partition)
			if !ok || off != v.StartOffset {
				t.Errorf("%s: MatchPartition(%q) = %d, %v; want %d", s, name, off, ok, v.StartOffset)
			}
		}
	}
}

func TestMatchRejects(t *testing.T) {
	def := mustParse(t, defaultTemplate)
	padded := mustParse(t, "{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}")
	ts := mustParse(t, "{{topic}}-{{partition}}-{{start_offset}}-{{timestamp:unit=MM}}")
	key := mustParse(t, "{{topic}}-{{partition}}-{{key}}-{{start_offset}}")
	year := mustParse(t, "{{timestamp:unit=yyyy}}/{{topic}}-{{partition}}-{{start_offset}}")
	for _, tc := range []struct {
		tpl  *Template
		name string
	}{
		{def, ""},
		{def, "topic-1"},
		{def, "topic-1-"},
		{def, "-1-2"},                    // empty topic
		{def, "t/x-1-2"},                 // "/" is not a topic character
		{def, "t-01-2"},                  // leading zero: Render never writes it
		{def, "t-1-02"},                  //
		{def, "t-2147483648-2"},          // partition overflows int32
		{def, "t-1-9223372036854775808"}, // offset overflows int64
		{def, "t-1-2.jsonl"},             // extension not stripped
		{padded, "t/1/2"},
		{padded, "t/000000001/00000000000000000002"},
		{padded, "t/0000000001/0000000000000000002"},
		{padded, "t/0000000001/99999999999999999999"},
		{ts, "t-1-2-13"}, // month 13
		{ts, "t-1-2-1"},
		{key, "t-1-a/b-2"},    // "/" is never in a key
		{key, "t-1-!2f-2"},    // lower-case escape
		{key, "t-1-!41-2"},    // 'A' needs no escape
		{key, "t-1-_a-2"},     // a leading '_' is escaped
		{key, "t-1-a.-2"},     // so is a trailing '.'
		{key, "t-1-!6Eul-2"},  // 'n' is escaped only in "null"
		{key, "t-1--2"},       // the empty key is !empty
		{year, "02024/t-1-2"}, // five digits with a leading zero
		{year, "999/t-1-2"},   // three digits
		{year, "-0001/t-1-2"}, // a padded negative year
		{year, "/t-1-2"},
	} {
		if v, ok := tc.tpl.Match(tc.name); ok {
			t.Errorf("%s: Match(%q) = %+v, want no match", tc.tpl, tc.name, v)
		}
	}
}

// TestMatchYears: a record's timestamp can be any int64 of milliseconds, so
// years past 9999 are written in full and still read back.
func TestMatchYears(t *testing.T) {
	tpl := mustParse(t, "{{timestamp:unit=yyyy}}{{timestamp:unit=MM}}/{{topic}}-{{partition}}-{{start_offset}}")
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.UnixMilli(-1), "196912/t-0-5"}, // Kafka's "no timestamp"
		{time.Date(5, 1, 1, 0, 0, 0, 0, time.UTC), "000501/t-0-5"},
		{time.Date(9999, 12, 1, 0, 0, 0, 0, time.UTC), "999912/t-0-5"},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "1000001/t-0-5"},
		{time.UnixMilli(1<<63 - 1), "29227899408/t-0-5"},
		{time.Date(-7, 3, 1, 0, 0, 0, 0, time.UTC), "-703/t-0-5"},
	} {
		name := tpl.Render(Vars{Topic: "t", StartOffset: 5, Time: tc.at})
		if name != tc.want {
			t.Errorf("%v: Render = %q, want %q", tc.at, name, tc.want)
		}
		if v, ok := tpl.Match(name); !ok || v.Topic != "t" || v.StartOffset != 5 {
			t.Errorf("Match(%q) = %+v, %v", name, v, ok)
		}
	}
}

func TestMatchAmbiguousPrefersLongestTopic(t *testing.T) {
	// "{{topic}}{{partition}}" cannot tell topic "a1" partition 2 from topic
	// "a" partition 12; Match picks the longest topic, MatchPartition knows.
	tpl := mustParse(t, "{{topic}}{{partition}}-{{start_offset}}")
	v, ok := tpl.Match("a12-5")
	if !ok || v.Topic != "a1" || v.Partition != 2 || v.StartOffset != 5 {
		t.Errorf("Match = %+v, %v; want a1/2/5", v, ok)
	}
	if off, ok := tpl.MatchPartition("a12-5", "a", 12); !ok || off != 5 {
		t.Errorf("MatchPartition(a, 12) = %d, %v; want 5", off, ok)
	}
	if _, ok := tpl.MatchPartition("a12-5", "a", 1); ok {
		t.Errorf("MatchPartition(a, 1) matched a12-5")
	}
}

// TestMatchAmbiguousKey: with "-" around {{key}} (a template Aiven's docs
// use), topic "a" and topic "a-1" can name different files alike, because
// both the topic and the key may contain "-". Match picks the longest
// topic; MatchPartition reads the name as the given partition's.
func TestMatchAmbiguousKey(t *testing.T) {
	tpl := mustParse(t, "{{topic}}-{{partition}}-{{key}}-{{start_offset}}")
	a := Vars{Topic: "a", Partition: 1, StartOffset: 5, Key: []byte("2-x")}
	a1 := Vars{Topic: "a-1", Partition: 2, StartOffset: 5, Key: []byte("x")}
	name := tpl.Render(a)
	if other := tpl.Render(a1); other != name {
		t.Fatalf("test premise: %q and %q should be alike", name, other)
	}
	if v, ok := tpl.Match(name); !ok || v.Topic != "a-1" || v.Partition != 2 || string(v.Key) != "x" {
		t.Errorf("Match(%q) = %+v, %v; want a-1/2/x", name, v, ok)
	}
	for _, v := range []Vars{a, a1} {
		if off, ok := tpl.MatchPartition(name, v.Topic, v.Partition); !ok || off != 5 {
			t.Errorf("MatchPartition(%q, %s, %d) = %d, %v", name, v.Topic, v.Partition, off, ok)
		}
	}
	// With "/" around the key, which no key or topic contains, they differ.
	slash := mustParse(t, "{{topic}}-{{partition}}/{{key}}/{{start_offset}}")
	if slash.Render(a) == slash.Render(a1) {
		t.Errorf("%s: %q for both", slash, slash.Render(a))
	}
}

func TestMatchPartitionFiltersOtherTopics(t *testing.T) {
	// Topic "a" partition 1 and topic "a-1" share the listing prefix "a-1-".
	tpl := mustParse(t, defaultTemplate)
	prefix, exact := tpl.PartitionPrefix("a", 1)
	if prefix != "a-1-" || !exact {
		t.Fatalf("PartitionPrefix = %q, %v", prefix, exact)
	}
	other := tpl.Render(Vars{Topic: "a-1", Partition: 3, StartOffset: 7}) // "a-1-3-7"
	if !strings.HasPrefix(other, prefix) {
		t.Fatalf("test premise: %q should share prefix %q", other, prefix)
	}
	if off, ok := tpl.MatchPartition(other, "a", 1); ok {
		t.Errorf("MatchPartition(%q, a, 1) = %d, want no match", other, off)
	}
	mine := tpl.Render(Vars{Topic: "a", Partition: 1, StartOffset: 42})
	if off, ok := tpl.MatchPartition(mine, "a", 1); !ok || off != 42 {
		t.Errorf("MatchPartition(%q, a, 1) = %d, %v; want 42", mine, off, ok)
	}
}

func TestMatchRepeatedVariableMustAgree(t *testing.T) {
	tpl := mustParse(t, "{{topic}}/{{partition}}/{{topic}}-{{partition:padding=true}}-{{start_offset}}")
	if _, ok := tpl.Match("a/1/a-0000000001-5"); !ok {
		t.Error("consistent name did not match")
	}
	if _, ok := tpl.Match("a/1/b-0000000001-5"); ok {
		t.Error("topic mismatch matched")
	}
	if _, ok := tpl.Match("a/1/a-0000000002-5"); ok {
		t.Error("partition mismatch matched")
	}
}

func TestPartitionPrefix(t *testing.T) {
	for _, tc := range []struct {
		tpl    string
		prefix string
		exact  bool
	}{
		{defaultTemplate, "a-b.c-3-", true},
		{"{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}", "a-b.c/0000000003/", true},
		{"logs/{{topic}}/{{partition}}/{{start_offset}}", "logs/a-b.c/3/", true},
		{"logs/{{topic}}/{{timestamp:unit=yyyy}}/{{partition}}-{{start_offset}}", "logs/a-b.c/", false},
		{"{{timestamp:unit=yyyy}}/{{topic}}-{{partition}}-{{start_offset}}", "", false},
		{"{{topic}}-{{start_offset}}-{{partition}}", "a-b.c-", true},
	} {
		prefix, exact := mustParse(t, tc.tpl).PartitionPrefix("a-b.c", 3)
		if prefix != tc.prefix || exact != tc.exact {
			t.Errorf("%s: PartitionPrefix = %q, %v; want %q, %v", tc.tpl, prefix, exact, tc.prefix, tc.exact)
		}
	}
}

func TestPartitionPrefixPrefixesRenderedNames(t *testing.T) {
	tpl := mustParse(t, "{{topic}}/{{partition:padding=true}}/{{timestamp:unit=yyyy}}/{{start_offset}}")
	v := Vars{Topic: "t", Partition: 5, StartOffset: 9, Time: time.Unix(0, 0)}
	prefix, _ := tpl.PartitionPrefix(v.Topic, v.Partition)
	if name := tpl.Render(v); !strings.HasPrefix(name, prefix) {
		t.Errorf("Render = %q does not start with PartitionPrefix %q", name, prefix)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		defaultTemplate,
		"{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}",
		"{{timestamp:unit=yyyy}}/{{timestamp:unit=MM}}/{{topic}}{{partition}}{{start_offset}}",
		"{{topic}}-{{partition:padding=yes}}", "{{", "}}", "{{}}", "{{ topic }}", "../x", "/x",
		"{{topic}}-{{partition}}-{{start_offset}}-{{key}}", "a//b",
		"{{key}}", "{{topic}}/{{partition}}/{{key}}", hiveKeyTemplate, "{{key}}{{start_offset}}",
	} {
		f.Add(s, "a-b.c", int32(3), int64(42), []byte("k/1"), false)
	}
	f.Add("{{topic}}/{{partition}}/{{key}}", "t", int32(0), int64(0), []byte(nil), true)
	f.Add("{{topic}}/{{partition}}/{{key}}", "t", int32(0), int64(0), []byte(strings.Repeat("!", 90)), false)
	f.Fuzz(func(t *testing.T, s, topic string, partition int32, offset int64, key []byte, null bool) {
		tpl, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(s) {
				t.Fatalf("Parse(%q): bad error %#v", s, err)
			}
			return
		}
		if tpl.String() != s {
			t.Fatalf("String() = %q, want %q", tpl.String(), s)
		}
		if !validTopic(topic) || partition < 0 || offset < 0 {
			return
		}
		v := Vars{Topic: topic, Partition: partition, StartOffset: offset, Time: time.Unix(offset%(1<<33), 0), Key: fuzzKey(key, null)}
		name := tpl.Render(v)
		if g := tpl.Group(v); (g == name) == tpl.hasOffset {
			t.Fatalf("%q: Group = %q, name %q", s, g, name)
		}
		if strings.HasPrefix(name, "/") {
			t.Fatalf("%q rendered %q with a leading /", s, name)
		}
		for _, seg := range strings.Split(name, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("%q rendered %q with segment %q", s, name, seg)
			}
		}
		prefix, exact := tpl.PartitionPrefix(topic, partition)
		if !strings.HasPrefix(name, prefix) {
			t.Fatalf("%q: name %q lacks PartitionPrefix %q", s, name, prefix)
		}
		if got, ok := tpl.MatchPartition(name, topic, partition); !ok || ((exact || tpl.hasOffset && !tpl.hasTS && !tpl.hasKey) && got != offset) {
			t.Fatalf("%q: MatchPartition(%q) = %d, %v; want %d", s, name, got, ok, offset)
		}
		m, ok := tpl.Match(name)
		if !ok {
			t.Fatalf("%q: Match(%q) failed", s, name)
		}
		if !tpl.hasTS && !m.KeyCut {
			if back := tpl.Render(m); back != name {
				t.Fatalf("%q: Match(%q) = %+v renders %q", s, name, m, back)
			}
		}
	})
}

func validTopic(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > maxTopicLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTopicChar(s[i]) {
			return false
		}
	}
	return true
}

func BenchmarkRender(b *testing.B) {
	tpl := mustParse(b, "{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}")
	v := Vars{Topic: "events.orders", Partition: 12, StartOffset: 123456789}
	b.ReportAllocs()
	for b.Loop() {
		_ = tpl.Render(v)
	}
}

// Confluent pads offsets to filename.offset.zero.pad.width (10 by default)
// and writes longer offsets in full; padding=N renders and reads back the
// same way.
func TestPaddingWidth(t *testing.T) {
	tpl := mustParse(t, "{{topic}}/partition={{partition}}/{{topic}}+{{partition}}+{{start_offset:padding=10}}")
	for _, tc := range []struct {
		off  int64
		want string
	}{
		{0, "t/partition=3/t+3+0000000000"},
		{1234, "t/partition=3/t+3+0000001234"},
		{9_999_999_999, "t/partition=3/t+3+9999999999"},
		{12_345_678_901, "t/partition=3/t+3+12345678901"},
		{1<<63 - 1, "t/partition=3/t+3+9223372036854775807"},
	} {
		v := Vars{Topic: "t", Partition: 3, StartOffset: tc.off}
		got := tpl.Render(v)
		if got != tc.want {
			t.Errorf("Render(%d) = %q, want %q", tc.off, got, tc.want)
		}
		m, ok := tpl.Match(got)
		if !ok || m.Topic != "t" || m.Partition != 3 || m.StartOffset != tc.off {
			t.Errorf("Match(%q) = %+v, %v", got, m, ok)
		}
		if off, ok := tpl.MatchPartition(got, "t", 3); !ok || off != tc.off {
			t.Errorf("MatchPartition(%q) = %d, %v", got, off, ok)
		}
	}
	// Not how Render writes a number: too short, or longer with a leading zero.
	for _, name := range []string{"t/partition=3/t+3+123", "t/partition=3/t+3+01234567890"} {
		if m, ok := tpl.Match(name); ok {
			t.Errorf("Match(%q) = %+v, want no match", name, m)
		}
	}
	if got := mustParse(t, "{{topic}}-{{partition:padding=3}}-{{start_offset}}").Render(Vars{Topic: "t", Partition: 7, StartOffset: 5}); got != "t-007-5" {
		t.Errorf("partition padding=3: %q", got)
	}
	for _, bad := range []string{"0", "21", "-1", "010", "yes"} {
		if _, err := Parse("{{topic}}-{{partition}}-{{start_offset:padding=" + bad + "}}"); err == nil || !strings.Contains(err.Error(), "padding must be true, false or a width") {
			t.Errorf("padding=%s: err = %v", bad, err)
		}
	}
}
