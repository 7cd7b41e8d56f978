// Package confluent holds the rules of Confluent's S3 sink connector for
// `spillway config import`: its storage and format classes, rotation, the
// partitioners and file names, its defaults, and why one of its keys has no
// mapping. The keys every sink shares (kafka, errors, the converters) and
// the YAML are package connect's.
package confluent

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/connect"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
)

// Confluent's rules, from kafka-connect-storage-cloud (TopicPartitionWriter,
// the format providers, S3SinkConnectorConfig) and
// kafka-connect-storage-common (the partitioners, StorageCommonConfig):
//
//	<topics.dir><directory.delim><encoded partition path><directory.delim>
//	    <topic><file.delim><partition><file.delim><start offset, zero-padded to
//	    filename.offset.zero.pad.width><extension>
//
// The encoded partition path is <topic><directory.delim>partition=<p> for
// DefaultPartitioner, and <topic><directory.delim><path.format of the
// record's time bucket> for TimeBasedPartitioner (Hourly and Daily are
// fixed path formats). topics.dir defaults to "topics", directory.delim to
// "/", file.delim to "+", the padding to 10. The extension is the
// format's: .json or .bin plus .gz with s3.compression.type gzip, .avro,
// and .<codec>.parquet (".snappy.parquet").
const (
	partitionerPkg  = "io.confluent.connect.storage.partitioner."
	confluentFormat = "io.confluent.connect.s3.format."
)

// parquetCodecExt is parquet-mr's CompressionCodecName extension, which
// Confluent puts before ".parquet"; ok is false for codecs Spillway can't
// write.
var parquetCodecExt = map[string]struct {
	ext, compression string
}{
	"none": {"", "none"}, "uncompressed": {"", "none"}, "snappy": {".snappy", "snappy"},
	"gzip": {".gz", "gzip"}, "zstd": {".zstd", "zstd"},
}

// avroCodecs maps avro.codec to format.compression (Spillway's avro writes
// gzip as the deflate codec).
var avroCodecs = map[string]string{"null": "none", "deflate": "gzip", "snappy": "snappy", "zstandard": "zstd"}

// Sinks are Confluent's sinks, for connect.Import.
func Sinks() []connect.Sink {
	return []connect.Sink{{
		Class: "io.confluent.connect.s3.S3SinkConnector", Product: connect.Confluent, Title: "Confluent's S3 sink",
		Map: importConfluent, Explain: confluentExplain,
	}}
}

func importConfluent(c *connect.Connector, d *connect.Doc) error {
	if err := confluentS3(c, d); err != nil {
		return err
	}
	ext, extFrom, err := confluentFormatClass(c, d)
	if err != nil {
		return err
	}
	if err := confluentRotation(c, d); err != nil {
		return err
	}
	if err := confluentNames(c, d, ext, extFrom); err != nil {
		return err
	}
	confluentBehaviour(c, d)
	return nil
}

func confluentS3(c *connect.Connector, d *connect.Doc) error {
	_, bucket, ok := c.Get("s3.bucket.name")
	if !ok || bucket == "" {
		return connect.Errorf("%s: s3.bucket.name is not set; Confluent's S3 sink needs it", c.File)
	}
	q := &connect.Query{}
	from := []string{"s3.bucket.name"}
	if key, v, ok := c.Get("s3.region"); ok && v != "" {
		q.Add("region", v)
		from = append(from, key)
	} else {
		q.Add("region", "us-west-2")
		from = append(from, "Confluent's default s3.region us-west-2")
	}
	_, pathStyle, psSet := c.Get("s3.path.style.access.enabled")
	if key, v, ok := c.Get("store.url"); ok && v != "" {
		q.Add("endpoint", v)
		from = append(from, key)
		// Confluent's default is path style, which matters with an
		// endpoint only.
		if !psSet || strings.EqualFold(pathStyle, "true") {
			q.Add("use_path_style", "true")
			from = append(from, "s3.path.style.access.enabled (default true)")
		}
	}
	if key, v, ok := c.Get("s3.ssea.name"); ok && v != "" {
		q.Add("ssetype", v)
		from = append(from, key)
	}
	if key, v, ok := c.Get("s3.sse.kms.key.id"); ok && v != "" {
		q.Add("kmskeyid", v)
		from = append(from, key)
	}
	d.Set("storage", "url", "s3://"+bucket+q.String(), "from "+strings.Join(from, ", "))
	if key, _, ok := c.Get("aws.access.key.id"); ok {
		d.Credential("AWS_ACCESS_KEY_ID", key)
	}
	if key, _, ok := c.Get("aws.secret.access.key"); ok {
		d.Credential("AWS_SECRET_ACCESS_KEY", key)
	}
	if key, v, ok := c.Get("s3.part.size"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < int64(5*config.MiB) {
			return connect.Errorf("%s: %s=%q is not a part size of at least 5MiB (5242880)", c.File, key, v)
		}
		d.Set("storage", "part_size", config.Size(n), "from "+key+"; Spillway holds (upload_concurrency+1) parts per open file, within its memory limit")
	}
	if key, v, ok := c.Get("s3.part.retries"); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			d.Set("storage", "max_retries", n, "from "+key)
		}
	}
	if key, _, ok := c.Get("s3.sse.customer.key"); ok {
		d.NotMapped(key + " (secret, not shown): NOT SUPPORTED: Spillway can't write with customer-provided keys (SSE-C); use s3.ssea.name aws:kms with a KMS key (ssetype and kmskeyid in storage.url)")
		d.Warn("s3.sse.customer.key: SSE-C is not supported; objects would be written without it")
	}
	return nil
}

// confluentFormatClass maps format.class and returns the files' extension.
func confluentFormatClass(c *connect.Connector, d *connect.Doc) (ext, extFrom string, err error) {
	extFrom = "the format's extension, as Confluent names files"
	key, class, ok := c.Get("format.class")
	if !ok || class == "" {
		return "", "", connect.Errorf("%s: format.class is not set; Confluent's S3 sink needs it (JsonFormat, ByteArrayFormat, AvroFormat or ParquetFormat)", c.File)
	}
	compKey, comp, compSet := c.Get("s3.compression.type")
	comp = strings.ToLower(comp)
	if !compSet {
		comp = "none"
	}
	if comp != "none" && comp != "gzip" {
		return "", "", connect.Errorf("%s: %s=%q is not one of Confluent's (none, gzip)", c.File, compKey, comp)
	}
	f := formatClass{c: c, d: d, comp: comp, compKey: compKey, compSet: compSet,
		streamExt: map[string]string{"none": "", "gzip": ".gz"}[comp],
		compFrom:  "Confluent's default s3.compression.type",
		from:      "from " + key + "=" + class,
		extFrom:   extFrom,
		// Confluent writes the value alone, as its converter made it.
		val: c.Conv["value"],
	}
	if compSet {
		f.compFrom = "from " + compKey
	}
	c.Stored["value"] = true
	switch strings.TrimPrefix(class, confluentFormat) {
	case "json.JsonFormat":
		return f.json()
	case "bytearray.ByteArrayFormat":
		return f.byteArray()
	case "avro.AvroFormat":
		return f.avro()
	case "parquet.ParquetFormat":
		return f.parquet()
	}
	return "", "", connect.Errorf("%s: format.class %q is not one Spillway imports (%sjson.JsonFormat, bytearray.ByteArrayFormat, avro.AvroFormat, parquet.ParquetFormat)", c.File, class, confluentFormat)
}

// formatClass maps one format.class, with s3.compression.type already
// read: each method returns the file extension and what it is from.
type formatClass struct {
	c                                                 *connect.Connector
	d                                                 *connect.Doc
	from, comp, compKey, compFrom, streamExt, extFrom string
	compSet                                           bool
	val                                               *connect.Converter
}

// typed sets the value-alone fields of the avro and parquet formats.
func (f formatClass) typed(typ string) {
	d := f.d
	d.Set("format", "fields", []string{"value"}, "the value alone")
	d.Set("format", "envelope", false, "the bare value")
	enc := "none"
	if f.val.Kind == connect.ConvBytes {
		enc = "base64"
	}
	comment, warning := f.val.TypedContent(connect.Confluent, typ)
	d.Set("format", "value_encoding", enc, comment)
	if warning != "" {
		d.Warn("%s", warning)
	}
	connect.KeyContent(f.c, d, connect.Confluent, typ, enc)
}

func (f formatClass) json() (string, string, error) {
	c, d, val := f.c, f.d, f.val
	d.Set("format", "type", "jsonl", f.from+": one value per line")
	d.Set("format", "fields", []string{"value"}, "Confluent writes the value alone")
	d.Set("format", "envelope", false, "the bare value, no object around it")
	enc := "none"
	if val.Kind == connect.ConvBytes {
		enc = "base64" // JsonConverter writes bytes as base64
	}
	comment, warning := val.TextContent(connect.Confluent)
	d.Set("format", "value_encoding", enc, comment)
	if warning != "" {
		d.Warn("%s", warning)
	}
	connect.KeyContent(c, d, connect.Confluent, "jsonl", enc)
	d.Set("format", "compression", f.comp, f.compFrom)
	return ".json" + f.streamExt, f.extFrom, nil
}

func (f formatClass) byteArray() (string, string, error) {
	c, d, val := f.c, f.d, f.val
	d.Set("format", "type", "bytes", f.from)
	d.Set("format", "fields", []string{"value"}, "the value's bytes alone")
	if val.Kind == connect.ConvWorker {
		// ByteArrayFormat writes byte[] values only: the worker's
		// converter must be ByteArrayConverter.
		val.Kind = connect.ConvBytes
	}
	if val.Kind != connect.ConvBytes {
		d.Warn("%s with format.class ByteArrayFormat: Spillway writes each value's bytes as they are in Kafka, not what the converter makes of them", val.Shown())
		d.NotMapped(c.Shown(val.Key) + ": NOT THE SAME: Spillway's bytes format writes each value's bytes as they are in Kafka")
	}
	connect.KeyContent(c, d, connect.Confluent, "bytes", "none")
	sep := `\n`
	sepFrom := "Confluent's default format.bytearray.separator (the line separator)"
	if k, v, ok := c.Get("format.bytearray.separator"); ok {
		sep = strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(v)
		sepFrom = "from " + k
	}
	d.Set("format", "bytes_separator", sep, sepFrom)
	d.Set("format", "compression", f.comp, f.compFrom)
	ext, extFrom := ".bin", f.extFrom
	if k, v, ok := c.Get("format.bytearray.extension"); ok {
		ext, extFrom = v, "from "+k+", then the compression's, as Confluent names files"
	}
	return ext + f.streamExt, extFrom, nil
}

func (f formatClass) avro() (string, string, error) {
	c, d := f.c, f.d
	d.Set("format", "type", "avro", f.from)
	f.typed("avro")
	if f.compSet {
		d.NotMapped(c.Shown(f.compKey) + ": Confluent ignores it for avro (avro.codec compresses)")
	}
	codec := "null"
	codecFrom := "Confluent's default avro.codec null"
	if k, v, ok := c.Get("avro.codec"); ok {
		codec, codecFrom = strings.ToLower(v), "from "+k
	}
	cmp, ok := avroCodecs[codec]
	if !ok {
		return "", "", connect.Errorf("%s: avro.codec %q is not one Spillway writes (null, deflate, snappy, zstandard)", c.File, codec)
	}
	d.Set("format", "compression", cmp, codecFrom)
	return ".avro", f.extFrom, nil
}

func (f formatClass) parquet() (string, string, error) {
	c, d := f.c, f.d
	d.Set("format", "type", "parquet", f.from)
	f.typed("parquet")
	if f.compSet {
		d.NotMapped(c.Shown(f.compKey) + ": Confluent ignores it for parquet (parquet.codec compresses)")
	}
	codec := "snappy"
	codecFrom := "Confluent's default parquet.codec snappy"
	if k, v, ok := c.Get("parquet.codec"); ok {
		codec, codecFrom = strings.ToLower(v), "from "+k
	}
	pc, ok := parquetCodecExt[codec]
	if !ok {
		return "", "", connect.Errorf("%s: parquet.codec %q is not one Spillway writes (none, snappy, gzip, zstd)", c.File, codec)
	}
	d.Set("format", "compression", pc.compression, codecFrom)
	return pc.ext + ".parquet", f.extFrom, nil
}

// noRotateAge is file.max_age for a Confluent config that rotates on
// flush.size only.
const noRotateAge = 24 * time.Hour

// confluentRotation maps flush.size and the rotation intervals.
func confluentRotation(c *connect.Connector, d *connect.Doc) error {
	if key, v, ok := c.Get("flush.size"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return connect.Errorf("%s: %s=%q is not a positive number of records", c.File, key, v)
		}
		d.Set("file", "max_records", n, "from "+key)
	}
	var age time.Duration
	var ageFrom []string
	for _, m := range []struct{ key, what string }{
		{"rotate.interval.ms", "Confluent measures it in record time; Spillway's max_age is wall-clock time since the file opened (it also closes files of idle partitions)"},
		{"rotate.schedule.interval.ms", "wall clock, as Confluent's"},
	} {
		_, v, ok := c.Get(m.key)
		if !ok || v == "" || v == "-1" {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return connect.Errorf("%s: %s=%q is not a number of milliseconds", c.File, m.key, v)
		}
		a := max(time.Duration(ms)*time.Millisecond, time.Second)
		if age == 0 || a < age {
			age = a
		}
		ageFrom = append(ageFrom, "from "+m.key+": "+m.what)
	}
	if age > 0 {
		d.Set("file", "max_age", age, strings.Join(ageFrom, "; "))
	} else {
		// Confluent has no time limit then: a file closes at flush.size
		// records, however long that takes. Spillway's max_age can't be
		// turned off, and its default, 5m, would cut many more, smaller
		// files on a quiet topic; a day is as near to "never" as keeps
		// records of a partition gone quiet from waiting uncommitted for
		// good, and keeps admin.stall_timeout, derived from it, bounded.
		d.Set("file", "max_age", noRotateAge, "NOT THE SAME: neither rotate.interval.ms nor rotate.schedule.interval.ms is set, so Confluent closes a file at flush.size records only, however long that takes; Spillway always has a time limit (at least 1s, and 5m by default), so a day is the nearest: a partition quiet for a day gets a file of fewer records")
		d.Warn("rotate.interval.ms and rotate.schedule.interval.ms are not set: Confluent closes files at flush.size records only; Spillway has no such setting and closes a file after file.max_age, written as %s (not its default of 5m), so a partition quiet that long gets a shorter file, with a start offset Confluent would not have used", noRotateAge)
	}
	return nil
}

// confluentNames maps the partitioner and the file name rules.
func confluentNames(c *connect.Connector, d *connect.Doc, ext, extFrom string) error {
	n, err := confluentNameParts(c)
	if err != nil {
		return err
	}
	dir, dirFrom, timeBased, err := confluentDir(c, d, n.dirDelim)
	if err != nil {
		return err
	}
	tz := "UTC"
	if timeBased {
		if tz, err = confluentTime(c, d); err != nil {
			return err
		}
	}
	prefix, dirDelim, fileDelim, width, nameKeys, file := n.prefix, n.dirDelim, n.fileDelim, n.width, n.nameKeys, n.file
	template := dir + dirDelim + file
	loc, err := partvalue.LoadLocation(tz)
	if err != nil {
		return connect.Errorf("%s: timezone %q: %v", c.File, tz, err)
	}
	if _, err := naming.Parse(template, naming.Location(loc)); err != nil {
		return connect.Errorf("%s: the object names can't be expressed in Spillway: %v", c.File, err)
	}
	if prefix != "" {
		d.Set("storage", "prefix", prefix, "topics.dir and directory.delim")
	} else {
		d.Set("storage", "prefix", "", "topics.dir is empty")
	}
	nameFrom := dirFrom + ", then <topic>" + fileDelim + "<partition>" + fileDelim + "<offset padded to " + strconv.Itoa(width) + ">"
	if len(nameKeys) > 0 {
		nameFrom += " (" + strings.Join(nameKeys, ", ") + ")"
	}
	d.Set("file", "name_template", template, nameFrom)
	d.Set("file", "extension", ext, extFrom)
	return nil
}

// confluentName is what of the object names topics.dir, the delimiters and
// the offset padding say.
type confluentName struct {
	prefix, dirDelim, fileDelim, file string
	width                             int
	nameKeys                          []string // the keys that shape the file name, for its comment
}

// confluentNameParts reads topics.dir, directory.delim, file.delim and
// filename.offset.zero.pad.width.
func confluentNameParts(c *connect.Connector) (confluentName, error) {
	topicsDir, dirDelim, fileDelim := "topics", "/", "+"
	var nameKeys []string // the keys that shape the file name, for its comment
	if _, v, ok := c.Get("topics.dir"); ok {
		topicsDir = v
	}
	if _, v, ok := c.Get("directory.delim"); ok && v != "" {
		dirDelim = v
		nameKeys = append(nameKeys, "directory.delim")
	}
	if _, v, ok := c.Get("file.delim"); ok && v != "" {
		fileDelim = v
		nameKeys = append(nameKeys, "file.delim")
	}
	width := 10
	if key, v, ok := c.Get("filename.offset.zero.pad.width"); ok {
		nameKeys = append(nameKeys, key)
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 20 {
			return confluentName{}, connect.Errorf("%s: %s=%q can't be expressed: Spillway pads offsets to 1 to 20 digits", c.File, key, v)
		}
		width = n
	}
	for _, s := range []string{topicsDir, dirDelim, fileDelim} {
		if strings.Contains(s, "{{") || strings.Contains(s, "}}") {
			return confluentName{}, connect.Errorf("%s: %q can't be part of a Spillway name: \"{{\" and \"}}\" mark its variables", c.File, s)
		}
	}
	prefix := ""
	if strings.TrimSpace(topicsDir) != "" {
		prefix = topicsDir + dirDelim
	}
	if err := naming.CheckPrefix(prefix); err != nil {
		return confluentName{}, connect.Errorf("%s: topics.dir %q can't be Spillway's storage.prefix: it %v", c.File, topicsDir, err)
	}
	file := fmt.Sprintf("{{topic}}%s{{partition}}%s{{start_offset:padding=%d}}", fileDelim, fileDelim, width)
	return confluentName{prefix: prefix, dirDelim: dirDelim, fileDelim: fileDelim, file: file, width: width, nameKeys: nameKeys}, nil
}

// confluentDir maps partitioner.class to the directories of the template,
// and says whether they are time buckets.
func confluentDir(c *connect.Connector, d *connect.Doc, dirDelim string) (dir, dirFrom string, timeBased bool, err error) {
	pkey, class, _ := c.Get("partitioner.class")
	if class == "" {
		pkey, class = "partitioner.class (default)", partitionerPkg+"DefaultPartitioner"
	}
	switch strings.TrimPrefix(class, partitionerPkg) {
	case "DefaultPartitioner":
		dir, dirFrom = "{{topic}}"+dirDelim+"partition={{partition}}", pkey+" DefaultPartitioner: partition=<p> directories"
	case "HourlyPartitioner":
		timeBased = true
		dir = "{{topic}}" + dirDelim + "year={{timestamp:unit=yyyy}}" + dirDelim + "month={{timestamp:unit=MM}}" + dirDelim + "day={{timestamp:unit=dd}}" + dirDelim + "hour={{timestamp:unit=HH}}"
		dirFrom = pkey + " HourlyPartitioner's path"
	case "DailyPartitioner":
		timeBased = true
		dir = "{{topic}}" + dirDelim + "year={{timestamp:unit=yyyy}}" + dirDelim + "month={{timestamp:unit=MM}}" + dirDelim + "day={{timestamp:unit=dd}}"
		dirFrom = pkey + " DailyPartitioner's path"
	case "TimeBasedPartitioner":
		timeBased = true
		_, format, _ := c.Get("path.format")
		_, durText, _ := c.Get("partition.duration.ms")
		path, unit, err := jodaTemplate(format)
		if err != nil {
			return "", "", false, connect.Errorf("%s: path.format %q can't be expressed in a Spillway template: %v", c.File, format, err)
		}
		dur, err := strconv.ParseInt(durText, 10, 64)
		if err != nil || dur != unit.ms {
			return "", "", false, connect.Errorf("%s: partition.duration.ms %q with path.format %q can't be expressed: Spillway's time buckets are the finest unit of the path (%s, partition.duration.ms=%d)", c.File, durText, format, unit.name, unit.ms)
		}
		dir, dirFrom = "{{topic}}"+dirDelim+path, pkey+" TimeBasedPartitioner with path.format and partition.duration.ms"
	case "FieldPartitioner":
		c.Use("partition.field.name")
		dir, dirFrom = "{{topic}}"+dirDelim+"partition={{partition}}", "NOT SUPPORTED: "+pkey+" FieldPartitioner (partition.field.name): Spillway has no field partitioning, so this writes DefaultPartitioner's partition=<p> directories instead"
		d.Warn("partitioner.class FieldPartitioner: Spillway has no field partitioning; files go to <topic>/partition=<p>/ instead of <field>=<value>/ directories")
	default:
		dir, dirFrom = "{{topic}}"+dirDelim+"partition={{partition}}", "NOT SUPPORTED: "+pkey+" "+class+" is a custom partitioner; this writes DefaultPartitioner's partition=<p> directories instead"
		d.Warn("partitioner.class %s: custom partitioners are not supported; files go to <topic>/partition=<p>/", class)
	}
	return dir, dirFrom, timeBased, nil
}

// confluentTime maps a time partitioner's timezone and timestamp.extractor,
// and returns the time zone.
func confluentTime(c *connect.Connector, d *connect.Doc) (string, error) {
	tz := "UTC"
	d.Note("file", "max_records", "; Spillway counts a file's records, Confluent a partition's across its open files: while records of two time buckets arrive together, files differ")
	tzKey, tzVal, tzSet := c.Get("timezone")
	tzFrom := "from " + tzKey
	if _, _, ok := c.Get("locale"); ok {
		tzFrom += " (locale changes nothing: the path has numbers only)"
	}
	if tzSet && tzVal != "" {
		tz = tzVal
		d.Set("file", "timezone", tz, tzFrom)
	} else {
		d.Set("file", "timezone", tz, "timezone is not set (Confluent requires it for time partitioning); UTC assumed")
	}
	_, ex, _ := c.Get("timestamp.extractor")
	switch ex {
	case "", "Wallclock":
		d.Set("file", "timestamp_source", "wallclock", "timestamp.extractor Wallclock: the time the record is written")
	case "Record":
		d.Set("file", "timestamp_source", "event", "timestamp.extractor Record: the record's own timestamp")
	case "RecordField":
		c.Use("timestamp.field")
		d.Set("file", "timestamp_source", "event", "NOT SUPPORTED: timestamp.extractor RecordField reads a field of the value; Spillway has no field timestamps, and uses the record's timestamp instead")
		d.Warn("timestamp.extractor RecordField: Spillway buckets by the record's timestamp, not by a field of the value; files of a record whose field and timestamp differ go elsewhere")
	default:
		return "", connect.Errorf("%s: timestamp.extractor %q can't be expressed: Spillway's time buckets come from the wall clock (Wallclock) or the record's timestamp (Record)", c.File, ex)
	}
	return tz, nil
}

// timeUnit is the finest unit of a path format and the partition duration
// that matches it.
type timeUnit struct {
	name string
	ms   int64
}

// jodaTemplate translates a Joda-Time pattern (path.format) into template
// text: quoted text is literal, YYYY/yyyy, MM, dd and HH are the
// timestamp units, and other punctuation is literal. Anything else (a
// two-digit year, minutes, month names) has no template variable.
func jodaTemplate(format string) (string, timeUnit, error) {
	if format == "" {
		return "", timeUnit{}, fmt.Errorf("it is empty; TimeBasedPartitioner needs it")
	}
	units := map[string]struct {
		v    string
		unit timeUnit
		rank int
	}{
		"YYYY": {"{{timestamp:unit=yyyy}}", timeUnit{"year", -1}, 1},
		"yyyy": {"{{timestamp:unit=yyyy}}", timeUnit{"year", -1}, 1},
		"MM":   {"{{timestamp:unit=MM}}", timeUnit{"month", -1}, 2},
		"dd":   {"{{timestamp:unit=dd}}", timeUnit{"day", 86_400_000}, 3},
		"HH":   {"{{timestamp:unit=HH}}", timeUnit{"hour", 3_600_000}, 4},
	}
	var b strings.Builder
	finest, rank := timeUnit{}, 0
	for i := 0; i < len(format); {
		ch := format[i]
		switch {
		case ch == '\'':
			j := i + 1
			for {
				if j >= len(format) {
					return "", timeUnit{}, fmt.Errorf("a quote at offset %d is not closed", i)
				}
				if format[j] == '\'' {
					if j+1 < len(format) && format[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(format[j])
				j++
			}
			if j == i+1 {
				b.WriteByte('\'') // '' is a quote
			}
			i = j + 1
		case ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			j := i
			for j < len(format) && format[j] == ch {
				j++
			}
			u, ok := units[format[i:j]]
			if !ok {
				return "", timeUnit{}, fmt.Errorf("%q at offset %d has no template variable; Spillway's are YYYY, MM, dd and HH", format[i:j], i)
			}
			b.WriteString(u.v)
			if u.rank > rank {
				finest, rank = u.unit, u.rank
			}
			i = j
		default:
			b.WriteByte(ch)
			i++
		}
	}
	if strings.Count(b.String(), "{{") != strings.Count(b.String(), "{{timestamp") {
		return "", timeUnit{}, fmt.Errorf("its literal text holds \"{{\", which marks a template variable")
	}
	if finest.ms < 0 {
		return "", timeUnit{}, fmt.Errorf("its finest unit is the %s, whose length varies; Spillway's time buckets are days or hours (dd or HH)", finest.name)
	}
	return b.String(), finest, nil
}

// confluentBehaviour maps null values, keys and headers, open files and
// schema handling.
func confluentBehaviour(c *connect.Connector, d *connect.Doc) {
	nulls, from := "fail", "Confluent's default behavior.on.null.values: a tombstone stops the connector"
	if key, v, ok := c.Get("behavior.on.null.values"); ok {
		nulls, from = strings.ToLower(v), "from "+key
	}
	switch nulls {
	case "fail", "ignore", "write":
		d.Set("errors", "null_values", nulls, from)
	default:
		d.Set("errors", "null_values", "fail", "behavior.on.null.values="+nulls+" is not fail, ignore or write")
	}
	for _, key := range []string{"store.kafka.keys", "store.kafka.headers"} {
		if v, _ := c.Peek(key); strings.EqualFold(strings.TrimSpace(v), "true") {
			c.Use(key)
			d.NotMapped(key + "=true: NOT SUPPORTED: Spillway writes no side files (.keys.*, .headers.*); to keep keys or headers, use format.type jsonl with envelope: true and fields [key, value, headers] (other content), or keep the connector")
			d.Warn("%s=true: Spillway writes no .keys/.headers side files", key)
		}
	}
	if key, v, ok := c.Get("partitioner.max.open.files"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			d.Set("backpressure", "max_open_files", n, "from "+key+": when more are open, the least recently written closes")
		}
	}
	if v, ok := c.Peek("schema.compatibility"); ok && !strings.EqualFold(strings.TrimSpace(v), "NONE") {
		key := "schema.compatibility"
		c.Use(key)
		d.NotMapped(c.Shown(key) + ": NOT SUPPORTED: Spillway doesn't project records onto a newer schema: with schema_registry it starts a new file at each change of schema, as Confluent does with NONE")
		d.Warn("schema.compatibility=%s: Spillway doesn't project records onto a newer schema; with a schema registry each file holds one schema and a change starts a new file (Confluent's NONE)", strings.TrimSpace(v))
	}
}

// confluentExplain says why a Confluent key is not mapped.
func confluentExplain(key string, why func(string) string) string {
	switch key {
	case "schema.compatibility":
		return why("with schema_registry, Spillway starts a new file at each change of schema, as NONE does")
	case "s3.credentials.provider.class":
		return why("Spillway uses the AWS SDK's default chain: environment variables, a profile (&profile=NAME in storage.url), or the instance's role")
	case "enable.conditional.writes":
		return why("Spillway always writes create-only (a name collision stops the writer that lost), whatever this says")
	case "storage.class":
		return why("S3Storage is the only one; storage.url says where Spillway writes")
	case "timezone", "locale", "timestamp.extractor", "timestamp.field", "path.format", "partition.duration.ms", "partition.field.name":
		return why("only read by time or field partitioners, which this config doesn't use")
	case "s3.path.style.access.enabled":
		return why("applies to store.url (an endpoint), which isn't set; AWS itself uses virtual-hosted requests")
	case "s3.compression.level":
		return why("Spillway compresses at its own fixed level")
	case "store.kafka.keys", "store.kafka.headers", "keys.format.class", "headers.format.class":
		return why("the connector writes no side files with this config, and Spillway none at all")
	case "s3.acl.canned", "s3.object.tagging", "s3.wan.mode", "s3.retry.backoff.ms", "retry.backoff.ms", "s3.http.send.expect.continue", "s3.send.digest":
		return why("no Spillway setting; set bucket policies, tags or acceleration on the bucket itself if you relied on it")
	case "avro.codec", "parquet.codec", "format.bytearray.extension", "format.bytearray.separator", "s3.compression.type":
		return why("not read by this format.class")
	}
	if strings.HasPrefix(key, "s3.proxy.") {
		return why("set HTTPS_PROXY in Spillway's environment instead (the user and password go in the proxy URL)")
	}
	return why("not a key Confluent's S3 sink documents, or none Spillway needs; check it and set the matching Spillway key by hand if it mattered")
}
