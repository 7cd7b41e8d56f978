package iceberg

import (
	"strings"

	iceio "github.com/apache/iceberg-go/io"
)

// A data file's location is recorded in the manifests as Spillway wrote it,
// '%' escapes of its partition folders included (naming renders a value
// Hive-style: "Österreich" is %C3%96sterreich, the string "null" is
// %6Eull): Java Iceberg's FileIOs and PyIceberg take a manifest's
// file_path literally, as the name of the object, and so does iceberg-go's
// blob FileIO (s3, gs, azure keys are kept raw). iceberg-go's LocalFS
// alone parses a file:// location as a URL and opens its decoded path, so
// a location with a '%' names another file there. Spillway's own opens
// through a FileIO (footer reads, schema checks, stat and remove of
// orphans) go through ioLocation, so that they open the file the
// manifest names.

// ioLocation is loc as iceberg-go's FileIO must be given it to open the
// object loc names literally. Only what Spillway wrote below the table's
// location base is literal: the base itself comes from the catalog and the
// warehouse URL, already escaped as a URL (a local warehouse in
// "/tmp/my lake" is file:///tmp/my%20lake), which LocalFS's decoding
// undoes. So for a file:// location under base, the part after base has
// '%', '?' and '#' escaped (the URL parser would decode the first and cut
// the path at the others); anything else is returned as it is.
func ioLocation(base, loc string) string {
	if len(loc) < len("file:") || !strings.EqualFold(loc[:len("file:")], "file:") {
		return loc
	}
	base = strings.TrimSuffix(base, "/") + "/"
	rest, ok := strings.CutPrefix(loc, base)
	if !ok {
		return loc
	}
	return base + fileEscaper.Replace(rest)
}

var fileEscaper = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// literalIO is a FileIO that opens, stats and removes the object a
// location under base names literally (see ioLocation).
type literalIO struct {
	iceio.IO
	base string
}

func (l literalIO) Open(name string) (iceio.File, error) { return l.IO.Open(ioLocation(l.base, name)) }
func (l literalIO) Remove(name string) error             { return l.IO.Remove(ioLocation(l.base, name)) }
