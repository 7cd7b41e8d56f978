package naming

import "testing"

// TestInStateDir: the names that can be storage.prefix's state directory,
// or a file in it, are those whose first segment can spell StateDir.
func TestInStateDir(t *testing.T) {
	for _, tc := range []struct {
		template, topic, ext string
		want                 bool
	}{
		{"{{topic}}/{{partition}}-{{start_offset}}", "_spillway", ".jsonl", true},
		{"{{topic}}/{{partition}}-{{start_offset}}", "events", ".jsonl", false},
		{"{{topic}}/{{partition}}-{{start_offset}}", "", ".jsonl", false}, // depends on the topic
		{"{{topic}}-{{partition}}-{{start_offset}}", "_spillway", ".jsonl", false},
		{"{{topic}}-{{partition}}/{{start_offset}}", "_spillway", ".jsonl", false},
		{"topics/{{topic}}/{{partition}}-{{start_offset}}", "_spillway", ".jsonl", false},
		{"{{topic}}{{partition}}/{{start_offset}}", "_spillway", "", false}, // a digit follows
		// The ledger's folder itself, written as text.
		{"_spillway/{{topic}}-{{partition}}-{{start_offset}}", "", ".jsonl", true},
		{"_spillway/{{topic}}-{{partition}}-{{start_offset}}", "events", ".jsonl", true},
		{"_spillway-{{topic}}/{{partition}}-{{start_offset}}", "events", ".jsonl", false},
		// Text and topic together.
		{"_{{topic}}/{{partition}}-{{start_offset}}", "spillway", ".jsonl", true},
		{"{{topic}}way/{{partition}}-{{start_offset}}", "_spill", ".jsonl", true},
		// A key renders letters after text; never a leading '_'.
		{"_{{key}}/{{topic}}", "", ".jsonl", true},
		{"{{key}}/{{topic}}", "", ".jsonl", false},
		{"{{key}}/{{topic}}", "_spillway", ".jsonl", false},
		// No "/": the whole name with its extension.
		{"_{{key}}", "", "", true},
		{"_{{key}}", "", ".bin", false},
	} {
		tmpl, err := Parse(tc.template)
		if err != nil {
			t.Fatalf("%s: %v", tc.template, err)
		}
		if got := tmpl.InStateDir(tc.topic, tc.ext); got != tc.want {
			t.Errorf("Parse(%q).InStateDir(%q, %q) = %v, want %v", tc.template, tc.topic, tc.ext, got, tc.want)
		}
	}
}
