package layout

import (
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

	"github.com/spillway/spillway/internal/naming"
)

// Extension returns the file name extension of a format and compression:
// the format's, then the compression's (".jsonl.gz", ".json.zst",
// ".jsonl.snappy").
//
// Avro and Parquet compress blocks inside the container, so their files
// get no compression suffix: the file itself is not a gzip or zstd stream
// and a ".gz" would mislead tools that go by the name.
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

// Names builds the keys of data files and takes them apart again: the
// storage prefix, the rendered name template, the extension. The zero
// Prefix and Ext are valid; Template is required.
type Names struct {
	Prefix   string
	Template *naming.Template
	Ext      string // from Extension
}

// NewNames parses template and returns the names of files under prefix
// with extension ext. Its errors are naming's, which name the template.
func NewNames(prefix, template, ext string, opts ...naming.Option) (Names, error) {
	t, err := naming.Parse(template, opts...)
	if err != nil {
		return Names{}, err
	}
	return Names{Prefix: prefix, Template: t, Ext: ext}, nil
}

// Key is the key of the file whose first record has the values v.
func (n Names) Key(v naming.Vars) string {
	return n.Prefix + n.Template.Render(v) + n.Ext
}

// Name is a data file's key taken apart.
type Name struct {
	Vars naming.Vars
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
	base, exts := SplitExt(rest)
	v, ok := n.Template.Match(base)
	if !ok {
		return Name{}, false
	}
	return Name{Vars: v, Exts: exts}, true
}

// ParsePartition is Parse for a key that must belong to the given topic
// partition: it reports the file's start offset, or ok=false when the key
// is not one of that partition's files.
func (n Names) ParsePartition(key, topic string, partition int32) (startOffset int64, ok bool) {
	rest, ok := strings.CutPrefix(key, n.Prefix)
	if !ok {
		return 0, false
	}
	return n.Template.MatchPartition(TrimExt(rest), topic, partition)
}

// PartitionPrefix is the key prefix every file of a topic partition starts
// with; exact as naming.Template.PartitionPrefix says.
func (n Names) PartitionPrefix(topic string, partition int32) (prefix string, exact bool) {
	p, exact := n.Template.PartitionPrefix(topic, partition)
	return n.Prefix + p, exact
}

// Decompress undoes the compression named by exts (as SplitExt gives
// them) and returns the stream of the format, with the format's extension
// ("" when exts name none). Close the returned reader; it does not close r.
func Decompress(r io.Reader, exts []string) (io.ReadCloser, string, error) {
	format := ""
	if len(exts) > 0 && !isCompression(exts[0]) {
		format = exts[0]
	}
	out := io.NopCloser(r)
	for i := len(exts) - 1; i >= 0; i-- {
		switch exts[i] {
		case "gz":
			zr, err := gzip.NewReader(out)
			if err != nil {
				return nil, "", err
			}
			out = zr
		case "zst":
			zr, err := zstd.NewReader(out, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, "", err
			}
			out = zstdCloser{zr}
		case "snappy":
			out = io.NopCloser(snappy.NewReader(out))
		default:
			if i != 0 {
				return nil, "", fmt.Errorf("extension .%s comes after a compression's", exts[i])
			}
		}
	}
	return out, format, nil
}

func isCompression(ext string) bool { return ext == "gz" || ext == "zst" || ext == "snappy" }

type zstdCloser struct{ *zstd.Decoder }

func (z zstdCloser) Close() error { z.Decoder.Close(); return nil }
