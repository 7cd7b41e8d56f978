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
//	{{start_offset:padding=10}}    zero-padded to at least 10 digits (Confluent's
//	                               filename.offset.zero.pad.width); padding=N
//	                               takes 1 to 20, and {{partition}} takes it too
//	{{timestamp:unit=yyyy}}        the year of Vars.Time (also MM, dd, HH)
//	{{key}}                        the record key, escaped (see Keys)
//	{{key_bucket:n=N}}             Iceberg's bucket of the key among N, 0 to
//	                               N-1, or "null" for the null key (see
//	                               keybucket.go)
//
// A template is parsed once at startup, where every mistake is reported with
// its byte offset, and rendered per file with no parsing left to do. The
// same parsed structure runs backwards (PartitionPrefix, Match), so storage
// listings can be read back into topic, partition, key and start offset.
//
// # Kinds of template
//
// An ordinary template has {{topic}}, {{partition}} and {{start_offset}}:
// every file gets a name of its own. One with {{key}} and no
// {{start_offset}} (such as "{{key}}" or "{{topic}}/{{partition}}/{{key}}")
// is Aiven's "one object per key": each file holds a key's latest record
// and is overwritten by the next one, so its delivery is at-least-once with
// an idempotent result (a replay writes the same object again).
// LatestPerKey reports this kind. Any other template is refused: two files
// would get the same name and the second would overwrite the first.
//
// # Grouping
//
// Records of one partition go to as many open files as the template tells
// apart: with {{key}} or {{timestamp}}, records with different keys or time
// buckets go to different files. Group renders everything but
// {{start_offset}}, which identifies a record's open file within its topic
// partition; the file's name is the template rendered with its first
// record's values. (Aiven differs: it renders {{timestamp}} from each
// record and {{start_offset}} from the partition's first record, so files
// of different hours share their start offset.)
//
// # Keys
//
// Keys are arbitrary bytes, and a name must stay a safe object key and
// file name. {{key}} writes a key escaped as package partvalue's Keys
// describe: every key, null included, gets a rendering of its own, never
// empty, "." or "..", of at most 200 bytes of [A-Za-z0-9._!-], that Match
// reads back (but for a long key, of which only the prefix can be).
//
// Keys that differ only in letter case get different names, which share a
// file on a case-insensitive file system (macOS, Windows), as topics that
// differ only in case already do.
//
// Within a topic partition, names are unique. Across topics they are too
// when "/" (or "=", or any byte outside [A-Za-z0-9._!-]) stands between
// {{key}} and {{topic}} or {{partition}}. With only "-", "." or "_" between,
// which keys and topics both contain, two topics where one extends the
// other's name through the separator can give different files one name:
// in "{{topic}}-{{partition}}-{{key}}-{{start_offset}}", topic "a"
// partition 1 key "2-x" and topic "a-1" partition 2 key "x".
//
// # Time
//
// {{timestamp}} renders Vars.Time in the template's time zone (Location,
// default UTC). Units are Aiven's: yyyy, MM, dd and HH, zero-padded to 4, 2,
// 2 and 2 digits. A year past 9999 is written in full ("10000", where Java
// writes "+10000"). Across a daylight saving change a local hour can hold
// two hours of records (autumn) or none (spring); names stay unique because
// they carry the start offset.
//
// A *Template is immutable after Parse and safe for concurrent use.
package naming

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/naming/partvalue"
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
	keyVar
	yearVar  // {{timestamp:unit=yyyy}}
	monthVar // {{timestamp:unit=MM}}
	dayVar   // {{timestamp:unit=dd}}
	hourVar  // {{timestamp:unit=HH}}
	// keyBucketVar is {{key_bucket:n=N}}: Iceberg's bucket of the key
	// (see keybucket.go). It comes after the time kinds, so isTime
	// excludes it.
	keyBucketVar
	// valueFieldVar is {{value_field:path=P,...}}: a transform of a
	// field of the record's value (see valuefield.go).
	valueFieldVar
)

func (k kind) isTime() bool { return k >= yearVar && k <= hourVar }

// piece is one literal run or one variable of a template.
type piece struct {
	kind   kind
	text   string // the literal text, or the variable's source for messages
	padded bool   // zero padding, for partitionVar and offsetVar
	width  int    // the padded width, when padded
	// dots, for topicVar, renders the topic's dots as "_":
	// {{topic:dots=_}}, the topic as an Iceberg table name (see
	// TableTopic), used in a table's folder.
	dots bool
	off  int // byte offset in the source, for error messages
	vf   *valueField
}

// Template is a parsed file name template. Build one with Parse.
type Template struct {
	src       string
	pieces    []piece
	loc       *time.Location
	hasTS     bool // contains a timestamp variable: Match cannot rebuild the name
	hasKey    bool
	hasOffset bool
	// bucket is the hash of {{key_bucket:n=N}}, nil without it; all of a
	// template's key_bucket variables take one N.
	bucket *keyBucket
	// paths are the value fields of {{value_field}}, each once.
	paths []string
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
	// Time is what {{timestamp}} renders, in the template's Location: the
	// caller picks the wall clock or the record's own timestamp
	// (file.timestamp_source). Match leaves it zero.
	Time time.Time
	// Key is the record key for {{key}}. nil is a null key and a non-nil
	// empty slice the empty key, as in kgo.Record.Key, so pass that as it
	// is: a copy made with append([]byte(nil), k...) turns the empty key
	// into a null one. Render and Group read Key and keep no reference.
	Key []byte
	// KeyCut is set by Match when the name holds a long key in its cut
	// form (a readable prefix and a hash): Key then holds only the bytes
	// of that prefix. Render ignores it.
	KeyCut bool
	// Fields are the record's values of the template's FieldPaths, in
	// their order (see valuefield.go): nil for a null or absent field.
	Fields []any
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

const knownVars = "topic, partition, start_offset, timestamp, key, key_bucket, value_field"

// An Option changes how Parse builds a Template.
type Option func(*Template)

// Location renders {{timestamp}} in loc rather than UTC; nil means UTC. Use
// partvalue.LoadLocation to turn a configured name into one.
func Location(loc *time.Location) Option {
	return func(t *Template) {
		if loc != nil {
			t.loc = loc
		}
	}
}

// Parse parses a template such as "{{topic}}-{{partition}}-{{start_offset}}".
//
// It rejects templates that would lose data or escape the storage prefix: a
// template must contain {{topic}}, {{partition}} and {{start_offset}}, or
// {{key}} and no {{start_offset}} (LatestPerKey); otherwise two files get
// the same name and the second overwrites the first. {{key}} must be kept
// apart from the variables beside it by text that is not all digits, for
// the same reason. And its literal text must not make a path that starts
// with "/" or has an empty, "." or ".." segment (object stores keep such
// keys verbatim while the local filesystem resolves them, so they would not
// list back as written).
func Parse(s string, opts ...Option) (*Template, error) {
	if s == "" {
		return nil, errAt(s, 0, "template is empty; the default is {{topic}}-{{partition}}-{{start_offset}}")
	}
	t := &Template{src: s, loc: time.UTC}
	for _, o := range opts {
		o(t)
	}
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
			if p.kind == valueFieldVar {
				if err := t.addValueField(&p, s, i, whole, lit.String()); err != nil {
					return nil, err
				}
			}
			flush()
			p.off, p.text = i, whole
			t.pieces = append(t.pieces, p)
			switch {
			case p.kind.isTime():
				t.hasTS = true
			case p.kind == keyVar:
				t.hasKey = true
			case p.kind == offsetVar:
				t.hasOffset = true
			case p.kind == keyBucketVar:
				if t.bucket != nil && t.bucket.n != p.width {
					return nil, errAt(s, i, "%q at offset %d has another bucket count than the {{key_bucket}} before it; use one", whole, i)
				}
				t.bucket = newKeyBucket(p.width)
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
	if err := t.checkKeyNeighbours(); err != nil {
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
	if name == "value_field" {
		return parseValueFieldVar(src, off, whole, param)
	}
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
		if hasParam && key == "dots" && val == "_" {
			return piece{kind: topicVar, dots: true}, nil
		}
		if hasParam {
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; {{topic}} takes no parameters but dots=_ (its dots as \"_\", as an Iceberg table name writes them)", param, whole, off)
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
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; {{%s}} takes only padding=true, padding=false or padding=N (a width of 1 to %d digits)", param, whole, off, name, offsetWidth)
		}
		width := partitionWidth
		if k == offsetVar {
			width = offsetWidth
		}
		switch val {
		case "true":
			return piece{kind: k, padded: true, width: width}, nil
		case "false":
			return piece{kind: k}, nil
		}
		// A width, as Confluent's filename.offset.zero.pad.width: numbers
		// shorter than it are zero-padded, longer ones written in full.
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > offsetWidth || val[0] == '0' {
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; padding must be true, false or a width of 1 to %d digits", param, whole, off, offsetWidth)
		}
		return piece{kind: k, padded: true, width: n}, nil
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
	case "key_bucket":
		return parseKeyBucket(src, off, whole, key, val, hasParam)
	case "key":
		if hasParam {
			return piece{}, errAt(src, off, "bad parameter %q in %q at offset %d; {{key}} takes no parameters", param, whole, off)
		}
		return piece{kind: keyVar}, nil
	}
	return piece{}, errAt(src, off, "unknown variable %q at offset %d; known: %s", whole, off, knownVars)
}

// checkRequired makes sure rendered names are unique per file, or, for
// LatestPerKey, per key.
func (t *Template) checkRequired() error {
	if t.LatestPerKey() {
		return nil
	}
	var topic, partition bool
	for _, p := range t.pieces {
		switch p.kind {
		case topicVar:
			// {{topic:dots=_}} names a.b and a_b alike: it does not
			// tell topics apart.
			topic = topic || !p.dots
		case partitionVar:
			partition = true
		}
	}
	offset := t.hasOffset
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

// checkKeyNeighbours rejects a {{key}} that the variables next to it could
// run into. A key renders as any run of [A-Za-z0-9._!-], so with nothing
// between, "{{key}}{{start_offset}}" names key "a1" at offset 5 and key "a"
// at offset 15 both "a15"; digits alone between them do no better. Any
// other byte between them ends a number, and within a topic partition the
// name parses one way.
func (t *Template) checkKeyNeighbours() error {
	for i, p := range t.pieces {
		if p.kind != keyVar {
			continue
		}
		for _, d := range []int{-1, 1} {
			j := i + d
			if j < 0 || j >= len(t.pieces) {
				continue
			}
			between, other := "nothing", t.pieces[j]
			if other.kind == literal {
				if !allDigits(other.text) || j+d < 0 || j+d >= len(t.pieces) {
					continue
				}
				between, other = "only digits", t.pieces[j+d]
			}
			return errAt(t.src, p.off, "{{key}} at offset %d has %s between it and %s at offset %d; a key can begin or end with what that variable writes, so two files could get the same name; put text such as \"/\" or \"-\" between them",
				p.off, between, other.text, other.off)
		}
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
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

// Location returns the time zone {{timestamp}} renders in.
func (t *Template) Location() *time.Location { return t.loc }

// LatestPerKey reports a template with {{key}} and no {{start_offset}}:
// Aiven's "one object per key". Each key has one object (per topic,
// partition or time bucket, when the template has them), and each record
// of that key replaces it. Such objects are overwritten, so they can't be
// written create-only, and delivery to them is at-least-once: after a crash
// the records since the last commit are written again, which leaves the
// same objects with the same content (the result is idempotent). Keys that
// differ only in case share an object on a case-insensitive file system,
// and with "{{key}}" alone one key of two topics shares one object, as in
// Aiven.
func (t *Template) LatestPerKey() bool { return t.hasKey && !t.hasOffset }

// SplitsPartition reports whether the records of one topic partition can
// belong to several open files at once: the template has {{key}} or
// {{timestamp}} (or {{key_bucket}}). When it is false, Group is the same for every record of a
// partition and need not be computed per record.
func (t *Template) SplitsPartition() bool {
	return t.hasKey || t.hasTS || t.bucket != nil || len(t.paths) > 0
}

// Render returns the file name (without extension) for a file whose first
// record has the given values.
func (t *Template) Render(v Vars) string {
	b := make([]byte, 0, t.maxLen(v))
	return string(t.appendPieces(b, v, len(t.pieces), false))
}

// maxLen bounds the length of v's name.
func (t *Template) maxLen(v Vars) int {
	n := 0
	for _, p := range t.pieces {
		switch p.kind {
		case literal:
			n += len(p.text)
		case topicVar:
			n += len(v.Topic)
		case keyVar:
			n += partvalue.KeyLen(v.Key)
		default:
			n += offsetWidth
		}
	}
	return n
}

// AppendGroup appends v's group to b and returns the extended buffer: the
// template rendered without {{start_offset}}. Within one topic partition,
// records with the same group get the same name for any start offset, and
// records whose names could differ get different groups, so the group
// identifies the open file a record belongs to: key open files by (topic,
// partition, group), and name a new file with Render and its first
// record's values. With a buffer that has room it allocates nothing, and a
// lookup m[string(group)] in a map keyed by string doesn't either.
//
// With a long key it hashes the key (SHA-256), so its cost grows with the
// key's length.
func (t *Template) AppendGroup(b []byte, v Vars) []byte {
	return t.appendPieces(b, v, len(t.pieces), true)
}

// Group is AppendGroup into a new string.
func (t *Template) Group(v Vars) string {
	return string(t.AppendGroup(make([]byte, 0, t.maxLen(v)), v))
}

// appendPieces renders the first n pieces of the template, without
// {{start_offset}} when group is set.
func (t *Template) appendPieces(b []byte, v Vars, n int, group bool) []byte {
	var year, month, day, hour int64
	if t.hasTS {
		year, month, day, hour = partvalue.Civil(v.Time, t.loc)
	}
	for _, p := range t.pieces[:n] {
		switch p.kind {
		case literal:
			b = append(b, p.text...)
		case topicVar:
			if p.dots {
				b = append(b, TableTopic(v.Topic)...)
			} else {
				b = append(b, v.Topic...)
			}
		case partitionVar:
			b = appendNum(b, int64(v.Partition), p.padded, p.width)
		case offsetVar:
			if !group {
				b = appendNum(b, v.StartOffset, p.padded, p.width)
			}
		case keyVar:
			b = partvalue.AppendKey(b, v.Key)
		case yearVar:
			b = appendNum(b, year, true, 4)
		case monthVar:
			b = appendNum(b, month, true, 2)
		case dayVar:
			b = appendNum(b, day, true, 2)
		case hourVar:
			b = appendNum(b, hour, true, 2)
		case keyBucketVar:
			b = t.bucket.append(b, v.Key)
		case valueFieldVar:
			b = p.vf.tr.AppendText(b, fieldOf(v.Fields, p.vf.field))
		}
	}
	return b
}

// appendNum appends n in decimal, zero-padded to width when pad is set.
func appendNum(b []byte, n int64, pad bool, width int) []byte {
	if !pad {
		return strconv.AppendInt(b, n, 10)
	}
	return partvalue.AppendPadded(b, n, width)
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
	return string(t.appendPieces(nil, Vars{Topic: topic, Partition: partition}, n, false)), exact
}

// Match parses a rendered name (without extension) back into its topic,
// partition, start offset and key. Timestamp parts must be well formed but
// are not returned (Vars.Time is zero). A long key (see Keys) can't be
// read back whole: Match then returns the bytes of its readable prefix in
// Key and sets KeyCut.
//
// Numbers must be in the form Render writes: when padded, exactly the
// padding width (10 or 20 for padding=true), or more digits with no leading
// zero; no leading zeros otherwise, and so must keys: Match accepts only
// text that Render writes for some key. A topic matches a run of Kafka
// topic characters [a-zA-Z0-9._-]. When a name can be read more than one way
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
// listing. For a LatestPerKey template, which has no start offset, it
// reports 0.
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
	haveKey                            bool
	keyText                            string // the key as the name writes it
	// haveDotted: a {{topic:dots=_}} before any {{topic}} read dottedText,
	// which the topic, once read, must render to.
	haveDotted bool
	dottedText string
}

// dotted matches a {{topic:dots=_}} piece, ps[0]: the topic's table name
// when the topic is known, else a run of topic characters without a dot
// that the topic read later must render to.
func (m *matcher) dotted(ps []piece, s string) bool {
	if m.haveTopic {
		r := TableTopic(m.v.Topic)
		return strings.HasPrefix(s, r) && m.match(ps[1:], s[len(r):])
	}
	if m.haveDotted {
		return strings.HasPrefix(s, m.dottedText) && m.match(ps[1:], s[len(m.dottedText):])
	}
	n := 0
	for n < len(s) && n < maxTopicLen && isTopicChar(s[n]) && s[n] != '.' {
		n++
	}
	for ; n > 0; n-- {
		m.dottedText, m.haveDotted = s[:n], true
		if m.match(ps[1:], s[n:]) {
			return true
		}
	}
	m.dottedText, m.haveDotted = "", false
	return false
}

// TableTopic is topic as an Iceberg table name: its dots as "_", since a
// dot separates namespace levels (Snowflake's and Redpanda's sinks do the
// same). iceberg.Options.Name and tables.TableName use it.
func TableTopic(topic string) string { return strings.ReplaceAll(topic, ".", "_") }

func (m *matcher) match(ps []piece, s string) bool {
	if len(ps) == 0 {
		return s == ""
	}
	p := ps[0]
	switch p.kind {
	case literal:
		return strings.HasPrefix(s, p.text) && m.match(ps[1:], s[len(p.text):])
	case topicVar:
		if p.dots {
			return m.dotted(ps, s)
		}
		return m.topic(ps, s)
	case partitionVar:
		if m.havePartition {
			r := string(appendNum(nil, int64(m.v.Partition), p.padded, p.width))
			return strings.HasPrefix(s, r) && m.match(ps[1:], s[len(r):])
		}
		return m.number(ps, s, p.padded, p.width, 1<<31-1, func(n int64) {
			m.v.Partition, m.havePartition = int32(n), true
		}, func() { m.havePartition = false })
	case offsetVar:
		if m.haveOffs {
			r := string(appendNum(nil, m.v.StartOffset, p.padded, p.width))
			return strings.HasPrefix(s, r) && m.match(ps[1:], s[len(r):])
		}
		return m.number(ps, s, p.padded, p.width, 1<<63-1, func(n int64) {
			m.v.StartOffset, m.haveOffs = n, true
		}, func() { m.haveOffs = false })
	case keyVar:
		return m.key(ps, s)
	case yearVar:
		return m.year(ps, s)
	case valueFieldVar:
		for _, n := range fieldLens(s) {
			if m.match(ps[1:], s[n:]) {
				return true
			}
		}
		return false
	case keyBucketVar:
		for _, n := range keyBucketLens(s, p.width) {
			if m.match(ps[1:], s[n:]) {
				return true
			}
		}
		return false
	default: // month, day, hour: fixed width, checked for range only
		w, lo, hi := 2, int64(0), int64(23)
		switch p.kind {
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

// topic matches a {{topic}} piece, ps[0]: the known topic, or each run of
// topic characters, longest first, that the rest of the name follows.
func (m *matcher) topic(ps []piece, s string) bool {
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
		if m.haveDotted && TableTopic(m.v.Topic) != m.dottedText {
			continue
		}
		if m.match(ps[1:], s[n:]) {
			return true
		}
	}
	m.v.Topic, m.haveTopic = "", false
	return false
}

// key matches a {{key}} piece, ps[0]: the key read before, or each text
// some key renders as, longest first, that the rest of the name follows.
func (m *matcher) key(ps []piece, s string) bool {
	if m.haveKey {
		return strings.HasPrefix(s, m.keyText) && m.match(ps[1:], s[len(m.keyText):])
	}
	n := 0
	for n < len(s) && n < partvalue.MaxKeyLen && partvalue.IsKeyChar(s[n]) {
		n++
	}
	for ; n > 0; n-- {
		key, cut, ok := partvalue.ParseKey(s[:n])
		if !ok {
			continue
		}
		m.v.Key, m.v.KeyCut, m.keyText, m.haveKey = key, cut, s[:n], true
		if m.match(ps[1:], s[n:]) {
			return true
		}
	}
	m.v.Key, m.v.KeyCut, m.keyText, m.haveKey = nil, false, "", false
	return false
}

// year reads a year as Render writes it: four digits from 0000 to 9999,
// and plain decimal outside that range (a record's timestamp can be as
// late as the year 292278994).
func (m *matcher) year(ps []piece, s string) bool {
	n := 0
	if n < len(s) && s[0] == '-' {
		n++
	}
	for n < len(s) && n < 20 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	for ; n >= 1; n-- {
		y, err := strconv.ParseInt(s[:n], 10, 64)
		if err != nil || string(appendNum(nil, y, true, 4)) != s[:n] {
			continue
		}
		if m.match(ps[1:], s[n:]) {
			return true
		}
	}
	return false
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
	n := 0
	for n < len(s) && n < 20 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if padded {
		// Exactly width digits, or more with no leading zero: a number
		// longer than the width is written in full.
		for ; n > width; n-- {
			if s[0] != '0' && try(s[:n]) {
				return true
			}
		}
		return n == width && try(s[:width])
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
