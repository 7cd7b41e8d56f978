package naming

import (
	"regexp"
	"strings"
)

// StateDir is the directory, directly under storage.prefix, where Spillway
// keeps its own state (the resume ledger, see docs/design.md). No data
// file may be written into it, nor take its name: the ledger would hold
// files it doesn't name, verify would skip them, and on a local file
// system a file of that name takes the directory's place.
const StateDir = "_spillway"

// InStateDir reports whether a file of topic that t names, followed by
// ext, can be written into StateDir: whether the name's first path
// segment (the whole name with ext, when it has no "/") can be StateDir.
// Only literal text, {{topic}} and {{key}} can spell it: the other
// variables render digits. With topic "", it reports whether that happens
// whatever the topic (kafka.topic_regex, before any topic is known).
func (t *Template) InStateDir(topic, ext string) bool {
	var b strings.Builder
	b.WriteString("^")
	slash := false
	for _, p := range t.pieces {
		switch p.kind {
		case literal:
			text, _, found := strings.Cut(p.text, "/")
			b.WriteString(regexp.QuoteMeta(text))
			slash = found
		case topicVar:
			if topic == "" {
				b.WriteString(`[^\s\S]`) // matches nothing
			} else if p.dots {
				b.WriteString(regexp.QuoteMeta(TableTopic(topic)))
			} else {
				b.WriteString(regexp.QuoteMeta(topic))
			}
		case keyVar:
			// The escaping never starts a key with '_' or '.' (see Keys).
			b.WriteString(`[A-Za-z0-9!-][A-Za-z0-9._!-]*`)
		default:
			b.WriteString(`[0-9]+`)
		}
		if slash {
			break
		}
	}
	if !slash {
		b.WriteString(regexp.QuoteMeta(ext))
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()).MatchString(StateDir)
}
