package naming

import "strings"

// Extension returns the file name extension of a format and compression:
// the format's, then the compression's (".jsonl.gz", ".json.zst",
// ".jsonl.snappy").
//
// Avro and Parquet compress blocks inside the container, so their files
// get no compression suffix: the file itself is not a gzip or zstd stream
// and a ".gz" would mislead tools that go by the name.
//
// The formats' extensions are format.Kind's (package formats), which
// naming can't import: config builds names and formats imports config.
// TestExtensionFollowsKinds holds this switch and knownExts to the table.
func Extension(format, compression string) string {
	var ext string
	switch format {
	case "avro", "parquet":
		return "." + format
	case "":
		return ""
	case "bytes":
		ext = ".bin" // Confluent's format.bytearray.extension default
	default:
		ext = "." + format // jsonl, json, csv
	}
	switch compression {
	case "gzip":
		ext += ".gz"
	case "zstd":
		ext += ".zst"
	case "snappy":
		ext += ".snappy"
	}
	return ext
}

// knownExts are the extensions Extension writes. SplitExt strips these
// only, so a template holding dots keeps them.
var knownExts = map[string]bool{"jsonl": true, "json": true, "csv": true, "avro": true, "parquet": true, "bin": true,
	"gz": true, "zst": true, "snappy": true}

// SplitExt separates "t-0-5.jsonl.zst" into "t-0-5" and [jsonl zst].
func SplitExt(name string) (string, []string) {
	var exts []string
	for {
		i := strings.LastIndexByte(name, '.')
		if i < 0 || !knownExts[name[i+1:]] {
			return name, exts
		}
		exts = append([]string{name[i+1:]}, exts...)
		name = name[:i]
	}
}

// TrimExt removes the known format and compression extensions of a name.
func TrimExt(name string) string {
	n, _ := SplitExt(name)
	return n
}

// FileExtension is the extension file.extension asks for: "auto" is
// Extension's, anything else is used as it is ("" for none).
func FileExtension(setting, format, compression string) string {
	if setting == "auto" {
		return Extension(format, compression)
	}
	return setting
}

// Names builds the keys of data files and takes them apart again: the
// storage prefix, the rendered name template, the extension. The zero
// Prefix and Ext are valid; Template is required.
type Names struct {
	Prefix   string
	Template *Template
	Ext      string // from FileExtension
	// Content is what the files hold, as Extension's parts ([jsonl gz]),
	// when Ext was set by hand and doesn't say it (Confluent's ".json"
	// on JSON lines, Aiven's ".gz" on csv). Nil means each key's own
	// extensions say it.
	Content []string
}

// NewConfiguredNames is NewNames for a config's file.extension setting
// and format: with an explicit extension, Content records the format and
// compression, which reading files back needs.
func NewConfiguredNames(prefix, template, extension, format, compression string, opts ...Option) (Names, error) {
	n, err := NewNames(prefix, template, FileExtension(extension, format, compression), opts...)
	if err != nil {
		return Names{}, err
	}
	if extension != "auto" {
		_, n.Content = SplitExt(Extension(format, compression))
		if n.Content == nil {
			n.Content = []string{}
		}
	}
	return n, nil
}

// NewNames parses template and returns the names of files under prefix
// with extension ext. Its errors are naming's, which name the template.
func NewNames(prefix, template, ext string, opts ...Option) (Names, error) {
	t, err := Parse(template, opts...)
	if err != nil {
		return Names{}, err
	}
	return Names{Prefix: prefix, Template: t, Ext: ext}, nil
}

// Key is the key of the file whose first record has the values v.
func (n Names) Key(v Vars) string {
	return n.Prefix + n.Template.Render(v) + n.Ext
}

// Name is a data file's key taken apart.
type Name struct {
	Vars Vars
	// Exts are its known extensions, format first: [jsonl zst]. They may
	// differ from Names.Ext: files written before format.compression
	// changed keep theirs.
	Exts []string
}

// Parse takes a key apart. ok is false when the key is not under the
// prefix or its name doesn't match the template.
func (n Names) Parse(key string) (Name, bool) {
	rest, ok := strings.CutPrefix(key, n.Prefix)
	if !ok {
		return Name{}, false
	}
	for _, c := range n.bases(rest) {
		if v, ok := n.Template.Match(c.base); ok {
			return Name{Vars: v, Exts: c.exts}, true
		}
	}
	return Name{}, false
}

type base struct {
	base string
	exts []string
}

// bases are the ways to read a name without its extension: with the
// configured extension cut (when it was set by hand, Content), then with
// the known extensions cut, which also reads files written before
// format.compression changed.
func (n Names) bases(rest string) []base {
	var out []base
	if n.Content != nil && strings.HasSuffix(rest, n.Ext) {
		out = append(out, base{rest[:len(rest)-len(n.Ext)], n.Content})
	}
	b, exts := SplitExt(rest)
	return append(out, base{b, exts})
}

// ContentExts are the format and compression of the file under key, as
// Extension's parts, for readback.Decompress and readback.Records.
func (n Names) ContentExts(key string) []string {
	if n.Content != nil && strings.HasSuffix(key, n.Ext) {
		return n.Content
	}
	_, exts := SplitExt(key)
	return exts
}

// ParsePartition is Parse for a key that must belong to the given topic
// partition: it reports the file's start offset, or ok=false when the key
// is not one of that partition's files.
func (n Names) ParsePartition(key, topic string, partition int32) (startOffset int64, ok bool) {
	rest, ok := strings.CutPrefix(key, n.Prefix)
	if !ok {
		return 0, false
	}
	for _, c := range n.bases(rest) {
		if off, ok := n.Template.MatchPartition(c.base, topic, partition); ok {
			return off, true
		}
	}
	return 0, false
}

// PartitionPrefix is the key prefix every file of a topic partition starts
// with; exact as Template.PartitionPrefix says.
func (n Names) PartitionPrefix(topic string, partition int32) (prefix string, exact bool) {
	p, exact := n.Template.PartitionPrefix(topic, partition)
	return n.Prefix + p, exact
}
