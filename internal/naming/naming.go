// Package naming parses file name templates once and renders them per file.
//
// Templates use the variables of Aiven's cloud-storage sinks, so a user can
// move a file.name.template over unchanged:
//
//	{{topic}}                      the record's topic
//	{{partition}}                  the partition, e.g. 7
//	{{partition:padding=true}}     zero-padded to 10 digits, e.g. 0000000007
//	{{start_offset}}               the offset of the file's first record
//	{{start_offset:padding=true}}  zero-padded to 20 digits
//	{{timestamp:unit=yyyy}}        UTC year of the file's first record (also MM, dd, HH)
//
// A template is parsed once at startup, where every mistake is reported with
// its byte offset, and rendered per file with no parsing left to do. The
// same parsed structure runs backwards (PartitionPrefix, Match), so crash
// recovery can list what storage already holds for a partition and read
// each file's start offset from its name.
//
// A *Template is immutable after Parse and safe for concurrent use.
package naming

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Widths of the zero-padded numbers. They are Aiven's, so files written by
// Spillway and by Aiven's connector sort the same way side by side.
const (
	partitionWidth = 10 // int32 max has 10 digits
	offsetWidth    = 20 // int64 max has 19: one spare, as in Aiven
)

// maxTopicLen is Kafka's limit on topic names; Match uses it to bound the
// search.
const maxTopicLen = 249

// kind is what one piece of a template renders.
type kind uint8

const (
	literal kind = iota
	topicVar
	partitionVar
	offsetVar
	yearVar  // {{timestamp:unit=yyyy}}
	monthVar // {{timestamp:unit=MM}}
	dayVar   // {{timestamp:unit=dd}}
	hourVar  // {{timestamp:unit=HH}}
)

// piece is one literal run or one variable of a template.
type piece struct {
	kind   kind
	text   string // the literal text, for kind == literal
	padded bool   // zero padding, for partitionVar and offsetVar
	off    int    // byte offset in the source, for error messages
}

// Template is a parsed file name template. Build one with Parse.
type Template struct {
	src    string
	pieces []piece
	hasTS  bool // contains a timestamp variable: Match cannot rebuild the name
}

// Vars are the values a template is rendered with: those of the file's first
// record.
type Vars struct {
	// Topic must be a valid Kafka topic name ([a-zA-Z0-9._-]{1,249}, not "."
	// or ".."); Parse's path checks rely on that.
	Topic string
	// Partition and StartOffset are never negative in Kafka.
	Partition   int32
	StartOffset int64
	// Time is the wall clock time of the file's first record; it is
	// rendered in UTC. Match leaves it zero.
	Time time.Time
}

// ParseError is a template syntax or safety error. Offset is the byte offset
// in the template of the construct at fault.
type ParseError struct {
	Template string
	Offset   int
	Msg      string // includes the offset, so the message stands alone
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("file name template %q: %s", e.Template, e.Msg)
}

func errAt(src string, off int, format string, args ...any) error {
	return &ParseError{Template: src, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

const knownVars = "topic, partition, start_offset, timestamp"

// Parse parses a template such as "{{topic}}-{{partition}}-{{start_offset}}".
//
// It rejects templates that would lose data or escape the storage prefix: a
// template must contain {{topic}}, {{partition}} and {{start_offset}}
// (otherwise two files get the same name and the second overwrites the
// first), and its literal text must not make a path that starts with "/" or
// has an empty, "." or ".." segment (object stores keep such keys verbatim
// while the local filesystem resolves them, so they would not list back as
// written).
func Parse(s string) (*Template, error) {
	if s == "" {
		return nil, errAt(s, 0, "template is empty; the default is {{topic}}-{{partition}}-{{start_offset}}")
	}
	t := &Template{src: s}
	var lit strings.Builder
	litOff := 0
	flush := func() {
		if lit.Len() > 0 {
			t.pieces = append(t.pieces, piece{kind: literal, text: lit.String(), off: litOff})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "{{"):
			end := strings.Index(s[i+2:], "}}")
			if end < 0 {
				return nil, errAt(s, i, "unclosed \"{{\" at offset %d", i)
			}
			whole := s[i : i+2+end+2]
			p, err := parseVar(s, i, whole, s[i+2:i+2+end])
			if err != nil {
				return nil, err
			}
			flush()
			p.off = i
			t.pieces = append(t.pieces, p)
			if p.kind >= yearVar {
				t.hasTS = true
			}
			i += len(whole)
		case strings.HasPrefix(s[i:], "}}"):
			return nil, errAt(s, i, "stray \"}}\" at offset %d without a matching \"{{\"", i)
		default:
			if lit.Len() == 0 {
				litOff = i
			}
			lit.WriteByte(s[i])
			i++
		}
	}
	flush()
	if err := t.checkRequired(); err != nil {
		return nil, err
	}
	if err := t.checkPath(); err != nil {
		return nil, err
	}
	return t, nil
}

// parseVar parses the inside of one "{{...}}" found at offset off. whole is
// the full "{{...}}" text, for messages.
func parseVar(src string, off int, whole, inner string) (piece, error) {
	inner = strings.TrimSpace(inner) // Aiven allows "{{ topic }}"
	if inner == "" {
		return piece{}, errAt(src, off, "empty variable %q at offset %d; known: %s", whole, off, knownVars)
	}
	name, param, hasParam := strings.Cut(inner, ":")
	name = strings.TrimSpace(name)
	param = strings.TrimSpace(param)
	var key, val string
	if hasParam {
		var ok bool
		key, val, ok = strings.Cut(param, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || key == "" || val == "" {
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; want name=value, e.g. padding=true", param, whole, off)
		}
	}
	switch name {
	case "topic":
		if hasParam {
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; {{topic}} takes no parameters", param, whole, off)
		}
		return piece{kind: topicVar}, nil
	case "partition", "start_offset":
		k := partitionVar
		if name == "start_offset" {
			k = offsetVar
		}
		if !hasParam {
			return piece{kind: k}, nil
		}
		if key != "padding" {
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; {{%s}} takes only padding=true or padding=false", param, whole, off, name)
		}
		padded, err := strconv.ParseBool(val)
		if err != nil || (val != "true" && val != "false") {
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; padding must be true or false", param, whole, off)
		}
		return piece{kind: k, padded: padded}, nil
	case "timestamp":
		if !hasParam || key != "unit" {
			return piece{}, errAt(src, off, "bad variable %q at offset %d; {{timestamp}} needs unit=yyyy, unit=MM, unit=dd or unit=HH", whole, off)
		}
		switch val {
		case "yyyy":
			return piece{kind: yearVar}, nil
		case "MM":
			return piece{kind: monthVar}, nil
		case "dd":
			return piece{kind: dayVar}, nil
		case "HH":
			return piece{kind: hourVar}, nil
		}
		return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; unit must be yyyy, MM, dd or HH (case matters: MM is month)", param, whole, off)
	case "key":
		return piece{}, errAt(src, off, "variable %q at offset %d is not supported yet (files are grouped by topic and partition); known: %s", whole, off, knownVars)
	}
	return piece{}, errAt(src, off, "unknown variable %q at offset %d; known: %s", whole, off, knownVars)
}

// checkRequired makes sure rendered names are unique per file.
func (t *Template) checkRequired() error {
	var topic, partition, offset bool
	for _, p := range t.pieces {
		switch p.kind {
		case topicVar:
			topic = true
		case partitionVar:
			partition = true
		case offsetVar:
			offset = true
		}
	}
	for _, req := range []struct {
		ok   bool
		name string
	}{{topic, "topic"}, {partition, "partition"}, {offset, "start_offset"}} {
		if !req.ok {
			return errAt(t.src, len(t.src), "template has no {{%s}}: without it two files get the same name and the second overwrites the first; the default is {{topic}}-{{partition}}-{{start_offset}}", req.name)
		}
	}
	return nil
}

// checkPath rejects literal text that makes unsafe or non-portable paths.
// Variables cannot: numbers are digits, and a valid topic name has no "/"
// and is never "." or "..", so a segment is only dangerous when it is made
// of literal text alone.
func (t *Template) checkPath() error {
	segStart := 0   // offset in src where the current segment starts
	onlyLit := true // the current segment has no variable so far
	var seg []byte  // literal text of the current segment
	check := func() error {
		if !onlyLit {
			return nil
		}
		switch string(seg) {
		case "":
			if segStart == 0 {
				return errAt(t.src, 0, "template starts with \"/\" at offset 0; names are relative to storage.prefix")
			}
			return errAt(t.src, segStart-1, "empty path segment (\"//\" or a trailing \"/\") at offset %d", segStart-1)
		case ".", "..":
			return errAt(t.src, segStart, "path segment %q at offset %d; names must stay under storage.prefix, so \".\" and \"..\" segments are not allowed", string(seg), segStart)
		}
		return nil
	}
	for _, p := range t.pieces {
		if p.kind != literal {
			onlyLit = false
			continue
		}
		for j := 0; j < len(p.text); j++ {
			if p.text[j] != '/' {
				seg = append(seg, p.text[j])
				continue
			}
			if err := check(); err != nil {
				return err
			}
			segStart, onlyLit, seg = p.off+j+1, true, seg[:0]
		}
	}
	return check()
}

// String returns the template's source text.
func (t *Template) String() string { return t.src }

// Render returns the file name (without extension) for a file whose first
// record has the given values.
func (t *Template) Render(v Vars) string {
	n := 0
	for _, p := range t.pieces {
		switch p.kind {
		case literal:
			n += len(p.text)
		case topicVar:
			n += len(v.Topic)
		default:
			n += offsetWidth
		}
	}
	b := make([]byte, 0, n)
	return string(t.appendPrefix(b, v, len(t.pieces)))
}

// appendPrefix renders the first n pieces of the template.
func (t *Template) appendPrefix(b []byte, v Vars, n int) []byte {
	utc := v.Time.UTC()
	for _, p := range t.pieces[:n] {
		switch p.kind {
		case literal:
			b = append(b, p.text...)
		case topicVar:
			b = append(b, v.Topic...)
		case partitionVar:
			b = appendNum(b, int64(v.Partition), p.padded, partitionWidth)
		case offsetVar:
			b = appendNum(b, v.StartOffset, p.padded, offsetWidth)
		case yearVar:
			b = appendNum(b, int64(utc.Year()), true, 4)
		case monthVar:
			b = appendNum(b, int64(utc.Month()), true, 2)
		case dayVar:
			b = appendNum(b, int64(utc.Day()), true, 2)
		case hourVar:
			b = appendNum(b, int64(utc.Hour()), true, 2)
		}
	}
	return b
}

// appendNum appends n in decimal, zero-padded to width when pad is set.
func appendNum(b []byte, n int64, pad bool, width int) []byte {
	if n < 0 || !pad {
		return strconv.AppendInt(b, n, 10)
	}
	var tmp [20]byte
	d := strconv.AppendInt(tmp[:0], n, 10)
	for i := len(d); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

// PartitionPrefix returns the rendered text of the template up to its first
// variable that is neither {{topic}} nor {{partition}}: every file of that
// topic partition has a name starting with prefix, so listing it in storage
// finds them all.
//
// exact reports that this first variable is {{start_offset}}. Only then can
// a listing be read back: with a timestamp before the offset (or no
// variable after the prefix) the listing must be wider than one partition.
// Even when exact, the listing may include files of other topics whose name
// extends this one through the template's separator (topic "a" and topic
// "a-1" with the default template); filter it with MatchPartition.
func (t *Template) PartitionPrefix(topic string, partition int32) (prefix string, exact bool) {
	n := 0
	for n < len(t.pieces) {
		k := t.pieces[n].kind
		if k != literal && k != topicVar && k != partitionVar {
			exact = k == offsetVar
			break
		}
		n++
	}
	return string(t.appendPrefix(nil, Vars{Topic: topic, Partition: partition}, n)), exact
}

// Match parses a rendered name (without extension) back into its topic,
// partition and start offset. Timestamp parts must be well formed but are
// not returned (Vars.Time is zero).
//
// Numbers must be in the form Render writes: exactly 10 or 20 digits when
// padded, no leading zeros otherwise. A topic matches a run of Kafka topic
// characters [a-zA-Z0-9._-]. When a name can be read more than one way
// (e.g. "{{topic}}{{partition}}..." with topic "a1" or "a"), Match returns
// the parse that gives earlier variables the longest text; with the default
// template and dash-separated templates the parse is unique. When the topic
// and partition are known, prefer MatchPartition, which cannot be ambiguous
// about them.
func (t *Template) Match(name string) (Vars, bool) {
	var m matcher
	if !m.match(t.pieces, name) {
		return Vars{}, false
	}
	return m.v, true
}

// MatchPartition is Match for a name that must belong to the given topic
// partition: it reports the name's start offset, or false if the name is
// not one of that partition's files. Use it to read a PartitionPrefix
// listing.
func (t *Template) MatchPartition(name, topic string, partition int32) (startOffset int64, ok bool) {
	m := matcher{v: Vars{Topic: topic, Partition: partition}, haveTopic: true, havePartition: true}
	if !m.match(t.pieces, name) {
		return 0, false
	}
	return m.v.StartOffset, true
}

// matcher is a backtracking matcher. A variable that appears twice must
// render the same both times, so the first binding is kept and checked.
type matcher struct {
	v                                  Vars
	haveTopic, havePartition, haveOffs bool
}

func (m *matcher) match(ps []piece, s string) bool {
	if len(ps) == 0 {
		return s == ""
	}
	p := ps[0]
	switch p.kind {
	case literal:
		return strings.HasPrefix(s, p.text) && m.match(ps[1:], s[len(p.text):])
	case topicVar:
		if m.haveTopic {
			return strings.HasPrefix(s, m.v.Topic) && m.match(ps[1:], s[len(m.v.Topic):])
		}
		n := 0
		for n < len(s) && n < maxTopicLen && isTopicChar(s[n]) {
			n++
		}
		for ; n > 0; n-- {
			if s[:n] == "." || s[:n] == ".." {
				continue
			}
			m.v.Topic, m.haveTopic = s[:n], true
			if m.match(ps[1:], s[n:]) {
				return true
			}
		}
		m.v.Topic, m.haveTopic = "", false
		return false
	case partitionVar:
		if m.havePartition {
			r := string(appendNum(nil, int64(m.v.Partition), p.padded, partitionWidth))
			return strings.HasPrefix(s, r) && m.match(ps[1:], s[len(r):])
		}
		return m.number(ps, s, p.padded, partitionWidth, 1<<31-1, func(n int64) {
			m.v.Partition, m.havePartition = int32(n), true
		}, func() { m.havePartition = false })
	case offsetVar:
		if m.haveOffs {
			r := string(appendNum(nil, m.v.StartOffset, p.padded, offsetWidth))
			return strings.HasPrefix(s, r) && m.match(ps[1:], s[len(r):])
		}
		return m.number(ps, s, p.padded, offsetWidth, 1<<63-1, func(n int64) {
			m.v.StartOffset, m.haveOffs = n, true
		}, func() { m.haveOffs = false })
	default: // timestamp parts: fixed width, checked for range only
		w, lo, hi := 2, int64(0), int64(23)
		switch p.kind {
		case yearVar:
			w, hi = 4, 9999
		case monthVar:
			lo, hi = 1, 12
		case dayVar:
			lo, hi = 1, 31
		}
		if len(s) < w {
			return false
		}
		n, ok := digits(s[:w])
		return ok && n >= lo && n <= hi && m.match(ps[1:], s[w:])
	}
}

// number tries each way to read a number at the start of s, longest first,
// and continues matching with it bound.
func (m *matcher) number(ps []piece, s string, padded bool, width int, maxVal int64, bind func(int64), unbind func()) bool {
	try := func(d string) bool {
		n, ok := digits(d)
		if !ok || n > maxVal {
			return false
		}
		bind(n)
		if m.match(ps[1:], s[len(d):]) {
			return true
		}
		unbind()
		return false
	}
	if padded {
		return len(s) >= width && try(s[:width])
	}
	n := 0
	for n < len(s) && n < 19 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	for ; n > 0; n-- {
		if n > 1 && s[0] == '0' {
			continue // not how Render writes it
		}
		if try(s[:n]) {
			return true
		}
	}
	return false
}

// digits parses an all-digit string of at most 19 digits, or one of 20
// digits that fits an int64 (zero-padded offsets).
func digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func isTopicChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
