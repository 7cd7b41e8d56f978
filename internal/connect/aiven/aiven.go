// Package aiven holds the rules of Aiven's S3, GCS and Azure Blob sink
// connectors for `spillway config import`: their storage, format and
// object-name keys, their defaults, and why a key of theirs has no
// mapping. The keys every sink shares (kafka, errors, the converters) and
// the YAML are package connect's.
package aiven

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/connect"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/naming/partvalue"
)

// Aiven's rules, from its cloud-storage-connectors-for-apache-kafka
// (FileNameFragment, OutputFormatFragment, S3ConfigFragment, S3SinkTask):
//
//   - A file is named by file.name.template, whole: nothing is added to a
//     template that is set. Without one it is
//     {{topic}}-{{partition}}-{{start_offset}}, plus ".avro" for avro, plus
//     the compression's extension (.gz, .snappy, .zst).
//   - The S3 sink's deprecated aws.s3.prefix turns the template off: the
//     key is the prefix (itself a template), then
//     <topic>-<partition>-<start offset padded to 20 digits>, plus the same
//     extensions.
//   - The defaults: format csv, fields [value], value encoding base64,
//     envelope on; compression gzip on S3 and none on GCS and Azure.
const aivenTemplate = "{{topic}}-{{partition}}-{{start_offset}}"

var aivenCompressionExt = map[string]string{"none": "", "gzip": ".gz", "snappy": ".snappy", "zstd": ".zst"}

// Sinks are Aiven's sinks, for connect.Import.
func Sinks() []connect.Sink {
	sink := func(class, store, title string) connect.Sink {
		return connect.Sink{
			Class: class, Product: connect.Aiven, Title: title,
			Map:     func(c *connect.Connector, d *connect.Doc) error { return importAiven(c, d, store) },
			Explain: aivenExplain,
		}
	}
	return []connect.Sink{
		sink("io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "s3", "Aiven's S3 sink"),
		sink("io.aiven.kafka.connect.gcs.GcsSinkConnector", "gcs", "Aiven's GCS sink"),
		sink("io.aiven.kafka.connect.azure.sink.AzureBlobSinkConnector", "azure", "Aiven's Azure Blob sink"),
	}
}

func importAiven(c *connect.Connector, d *connect.Doc, store string) error {
	var err error
	switch store {
	case "s3":
		err = aivenS3(c, d)
	case "gcs":
		err = aivenGCS(c, d)
	default:
		err = aivenAzure(c, d)
	}
	if err != nil {
		return err
	}
	typ, compression, err := aivenFormat(c, d, store)
	if err != nil {
		return err
	}
	return aivenNames(c, d, store, typ, compression)
}

func aivenS3(c *connect.Connector, d *connect.Doc) error {
	bucketKey, bucket, ok := c.Get("aws.s3.bucket.name", "aws_s3_bucket")
	if !ok || bucket == "" {
		return connect.Errorf("%s: aws.s3.bucket.name (or aws_s3_bucket) is not set; the S3 sink needs it", c.File)
	}
	q := &connect.Query{}
	from := []string{bucketKey}
	if key, v, ok := c.Get("aws.s3.region", "aws_s3_region"); ok && v != "" {
		q.Add("region", v)
		from = append(from, key)
	}
	if key, v, ok := c.Get("aws.s3.endpoint", "aws_s3_endpoint"); ok && v != "" {
		// Aiven's S3 client uses path-style requests with an endpoint.
		q.Add("endpoint", v)
		q.Add("use_path_style", "true")
		from = append(from, key+" (path style, as Aiven)")
	}
	if key, v, ok := c.Get("aws.s3.sse.algorithm"); ok && v != "" {
		q.Add("ssetype", v)
		from = append(from, key)
	}
	for _, m := range []struct{ key, param string }{
		{"aws.sts.role.arn", "role"},
		{"aws.sts.role.session.name", "role_session_name"},
		{"aws.sts.role.external.id", "role_external_id"},
	} {
		if _, v, ok := c.Get(m.key); ok && v != "" {
			q.Add(m.param, v)
			from = append(from, m.key)
		}
	}
	if key, v, ok := c.Get("aws.sts.role.session.duration"); ok && v != "" {
		q.Add("role_duration", v+"s")
		from = append(from, key)
	}
	d.Set("storage", "url", "s3://"+bucket+q.String(), "from "+strings.Join(from, ", "))
	if key, _, ok := c.Get("aws.access.key.id", "aws_access_key_id"); ok {
		d.Credential("AWS_ACCESS_KEY_ID", key)
	}
	if key, _, ok := c.Get("aws.secret.access.key", "aws_secret_access_key"); ok {
		d.Credential("AWS_SECRET_ACCESS_KEY", key)
	}
	if key, v, ok := c.Get("aws.s3.part.size.bytes"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return connect.Errorf("%s: %s=%q is not a positive number of bytes", c.File, key, v)
		}
		size := config.Size(n)
		if size < 5*config.MiB {
			d.Set("storage", "part_size", 5*config.MiB, fmt.Sprintf("%s=%d is below S3's smallest part; 5MiB is the least Spillway takes", key, n))
		} else {
			d.Set("storage", "part_size", size, "from "+key)
		}
	}
	if key, v, ok := c.Get("aws.s3.backoff.max.retries"); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			d.Set("storage", "max_retries", n, "from "+key+"; Spillway's backoff is its own (capped exponential)")
		}
	}
	return nil
}

func aivenGCS(c *connect.Connector, d *connect.Doc) error {
	_, bucket, ok := c.Get("gcs.bucket.name")
	if !ok || bucket == "" {
		return connect.Errorf("%s: gcs.bucket.name is not set; the GCS sink needs it", c.File)
	}
	d.Set("storage", "url", "gs://"+bucket, "from gcs.bucket.name")
	if key, v, ok := c.Get("gcs.credentials.path"); ok && v != "" {
		d.Credential("GOOGLE_APPLICATION_CREDENTIALS="+v, key)
	}
	if key, v, ok := c.Get("gcs.credentials.json"); ok && v != "" {
		d.Credential("GOOGLE_APPLICATION_CREDENTIALS=<a file holding it>", key)
	}
	return nil
}

func aivenAzure(c *connect.Connector, d *connect.Doc) error {
	_, container, ok := c.Get("azure.storage.container.name")
	if !ok || container == "" {
		return connect.Errorf("%s: azure.storage.container.name is not set; the Azure Blob sink needs it", c.File)
	}
	d.Set("storage", "url", "azblob://"+container, "from azure.storage.container.name")
	if key, _, ok := c.Get("azure.storage.connection.string"); ok {
		d.Credential("AZURE_STORAGE_CONNECTION_STRING", key)
	}
	return nil
}

// aivenFormat maps the output format and returns its type and compression.
func aivenFormat(c *connect.Connector, d *connect.Doc, store string) (typ, compression string, err error) {
	typ, typFrom := "csv", "Aiven's default format.output.type"
	if key, v, ok := c.Get("format.output.type"); ok {
		typ, typFrom = strings.ToLower(v), "from "+key
	}
	// Aiven's output types are its own list; each is also Spillway's
	// format.type of the same name.
	switch typ {
	case "csv", "json", "jsonl", "parquet", "avro":
	default:
		return "", "", connect.Errorf("%s: format.output.type %q is not one of Aiven's (csv, json, jsonl, parquet, avro)", c.File, typ)
	}
	d.Set("format", "type", typ, typFrom)
	kind := formats.Of(typ)

	compression, err = aivenCompression(c, d, store, typ, kind)
	if err != nil {
		return "", "", err
	}
	fields, err := aivenFields(c, d, typ, kind)
	if err != nil {
		return "", "", err
	}
	c.Stored["key"], c.Stored["value"] = slices.Contains(fields, "key"), slices.Contains(fields, "value")
	enc := aivenValueEncoding(c, d, typ, kind)
	connect.KeyContent(c, d, connect.Aiven, typ, enc)
	if err := aivenFileKeys(c, d); err != nil {
		return "", "", err
	}
	return typ, compression, nil
}

// aivenCompression maps file.compression.type, whose default depends on
// the store.
func aivenCompression(c *connect.Connector, d *connect.Doc, store, typ string, kind format.Kind) (string, error) {
	compression, compFrom := "none", "Aiven's default on GCS and Azure"
	compKey := "file.compression.type (not set)"
	if store == "s3" {
		compression, compFrom = "gzip", "Aiven's default on S3"
	}
	if key, v, ok := c.Get("file.compression.type", "output_compression"); ok && v != "" {
		compression, compFrom, compKey = strings.ToLower(v), "from "+key, key
	}
	if _, ok := aivenCompressionExt[compression]; !ok {
		return "", connect.Errorf("%s: file.compression.type %q is not one of Aiven's (none, gzip, snappy, zstd)", c.File, compression)
	}
	if compression != "none" && kind.CompressesInside {
		compFrom += fmt.Sprintf("; Spillway compresses %s inside the file (its codec), where Aiven compresses the file's bytes: same name, other content", typ)
		d.Warn("%s, compression %s, with format.output.type=%s: Aiven compresses the whole file; Spillway compresses inside the %s container (its codec), so the files' bytes differ", compKey, compression, typ, typ)
	}
	d.Set("format", "compression", compression, compFrom)
	return compression, nil
}

// aivenFields maps format.output.fields.
func aivenFields(c *connect.Connector, d *connect.Doc, typ string, kind format.Kind) ([]string, error) {
	fields, fieldsFrom := []string{"value"}, "Aiven's default format.output.fields"
	if key, v, ok := c.Get("format.output.fields", "output_fields"); ok {
		fields, fieldsFrom = connect.List(strings.ToLower(v)), "from "+key
	}
	for _, f := range fields {
		if !slices.Contains([]string{"key", "value", "offset", "timestamp", "headers"}, f) {
			return nil, connect.Errorf("%s: format.output.fields lists %q, which is not one of Aiven's (key, value, offset, timestamp, headers)", c.File, f)
		}
	}
	if kind.JSONRecords && slices.Contains(fields, "timestamp") {
		fieldsFrom += "; NOT THE SAME timestamp: Spillway writes epoch milliseconds, Aiven an ISO-8601 string"
		d.Warn("format.output.fields with timestamp and format.output.type=%s: Spillway writes the timestamp as epoch milliseconds, Aiven as an ISO-8601 string", typ)
	}
	d.Set("format", "fields", fields, fieldsFrom)
	return fields, nil
}

// aivenValueEncoding maps format.output.fields.value.encoding (csv only)
// and what the value converter makes, and returns value_encoding.
func aivenValueEncoding(c *connect.Connector, d *connect.Doc, typ string, kind format.Kind) string {
	val := c.Conv["value"]
	encKey, enc, encSet := c.Get("format.output.fields.value.encoding")
	switch {
	case kind.Name == format.CSV().Name:
		encFrom := "Aiven's default for csv"
		if encSet {
			encFrom = "from " + encKey
		} else {
			enc = "base64"
		}
		enc = strings.ToLower(enc)
		switch {
		case !c.Stored["value"] || val.Kind == connect.ConvWorker:
		case val.Kind == connect.ConvRegistry:
			encFrom += "; " + val.Shown() + ": values decoded through schema_registry (below) are written as JSON text"
		case val.Kind == connect.ConvJSONEnvelope:
			encFrom += "; " + val.Shown() + val.Schemas() + ": NOT THE SAME: Spillway writes the whole {\"schema\":..,\"payload\":..} JSON of each record, Aiven the payload"
			d.Warn("%s%s: Spillway writes each record's whole {\"schema\":...,\"payload\":...} JSON as the csv value; Aiven writes the payload", val.Shown(), val.Schemas())
		default:
			encFrom += "; " + val.Shown() + ": the bytes as this encoding says, as Aiven writes them"
		}
		d.Set("format", "value_encoding", enc, encFrom)
	case kind.JSONRecords:
		// Aiven's JSON writers take the value as the converter made it:
		// bytes (ByteArrayConverter) become base64 strings, strings
		// strings, structs objects.
		enc = "none"
		if val.Kind == connect.ConvBytes {
			enc = "base64"
		}
		comment, warning := val.TextContent(connect.Aiven)
		d.Set("format", "value_encoding", enc, comment)
		if warning != "" && c.Stored["value"] {
			d.Warn("%s", warning)
		}
	default:
		// avro and parquet: value_encoding base64 makes bytes fields, as
		// Aiven writes ByteArrayConverter's bytes; none string fields.
		enc = "none"
		if (c.Stored["value"] && val.Kind == connect.ConvBytes) || ((!c.Stored["value"] || val.Kind == connect.ConvRegistry) && c.Stored["key"] && c.Conv["key"].Kind == connect.ConvBytes) {
			enc = "base64"
		}
		comment, warning := val.TypedContent(connect.Aiven, typ)
		if !c.Stored["value"] {
			comment, warning = "the value is not written; this is the key's encoding", ""
		}
		d.Set("format", "value_encoding", enc, comment)
		if warning != "" {
			d.Warn("%s", warning)
		}
	}
	if encSet && kind.Name != format.CSV().Name {
		d.NotMapped(c.Shown(encKey) + ": Aiven applies it to csv only, and so does this import")
	}
	return enc
}

// aivenFileKeys maps format.output.envelope, file.max.records and
// file.max.bytes.
func aivenFileKeys(c *connect.Connector, d *connect.Doc) error {
	if key, v, ok := c.Get("format.output.envelope"); ok {
		env, err := strconv.ParseBool(v)
		if err != nil {
			return connect.Errorf("%s: %s=%q is not true or false", c.File, key, v)
		}
		d.Set("format", "envelope", env, "from "+key)
	}
	if key, v, ok := c.Get("file.max.records"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			d.Set("file", "max_records", n, "from "+key)
		}
	}
	if key, v, ok := c.Get("file.max.bytes"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			d.Set("file", "max_bytes", config.Size(n), "from "+key)
		}
	}
	return nil
}

// aivenNames maps the object names: prefix, template, extension.
func aivenNames(c *connect.Connector, d *connect.Doc, store, typ, compression string) error {
	ext := aivenCompressionExt[compression]
	if typ == "avro" {
		ext = ".avro" + ext
	}
	tzKey, tz, tzSet := c.Get("file.name.timestamp.timezone", "timestamp.timezone")
	srcKey, src, srcSet := c.Get("file.name.timestamp.source", "timestamp.source")
	if tzSet {
		d.Set("file", "timezone", tz, "from "+tzKey)
	} else {
		tz = "UTC"
	}
	if srcSet {
		s := strings.ToLower(src)
		if s != "wallclock" && s != "event" {
			return connect.Errorf("%s: %s=%q is not wallclock or event", c.File, srcKey, src)
		}
		d.Set("file", "timestamp_source", s, "from "+srcKey)
	}
	prefix, template, extension := "", aivenTemplate, ext
	templateFrom := "Aiven's default file.name.template"
	templateKey := "file.name.template"
	extFrom := "Aiven's default names: the compression's extension only"
	if typ == "avro" {
		extFrom = "Aiven's default names: .avro and the compression's extension"
	}
	if _, _, set := c.Get("file.compression.type", "output_compression"); !set && store == "s3" && compression == "gzip" {
		extFrom += " (.gz, as documented; some releases leave it out when file.compression.type is unset: if your objects have none, set extension: '')"
	}
	if key, v, ok := c.Get("aws.s3.prefix", "aws_s3_prefix"); ok && v != "" && store == "s3" {
		if _, _, set := c.Get("file.name.template"); set {
			d.NotMapped(c.Shown("file.name.template") + ": Aiven ignores it when " + key + " is set, and so does this import")
		}
		if strings.Contains(v, "utc_date") || strings.Contains(v, "local_date") {
			return connect.Errorf("%s: %s=%q uses {{utc_date}} or {{local_date}}, which Spillway's templates can't express; use {{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}} (names change)", c.File, key, v)
		}
		template = "{{topic}}-{{partition}}-{{start_offset:padding=true}}"
		templateFrom = "Aiven's names when " + key + " is set: offsets padded to 20 digits"
		templateKey = key
		if strings.Contains(v, "{{") {
			template = v + template
			templateFrom = "from " + key + " (a template), then " + templateFrom
		} else {
			prefix = v
		}
		if prefix != "" {
			d.Set("storage", "prefix", prefix, "from "+key)
		}
	} else {
		if key, v, ok := c.Get("file.name.prefix"); ok && v != "" {
			if store == "s3" {
				d.NotMapped(c.Shown(key) + ": Aiven's S3 sink doesn't read it (its prefix is aws.s3.prefix), so it is left out to keep the names")
			} else {
				prefix = v
				d.Set("storage", "prefix", prefix, "from "+key)
			}
		}
		if key, v, ok := c.Get("file.name.template"); ok && v != "" {
			template, extension = v, ""
			templateFrom = "from " + key
			extFrom = "Aiven adds nothing to a template that is set"
		}
	}
	c.Use("file.name.template", "file.name.prefix")
	if err := naming.CheckPrefix(prefix); err != nil {
		return connect.Errorf("%s: the prefix %q can't be Spillway's storage.prefix: it %v", c.File, prefix, err)
	}
	loc, err := partvalue.LoadLocation(tz)
	if err != nil {
		return connect.Errorf("%s: time zone %q: %v", c.File, tz, err)
	}
	t, err := naming.Parse(template, naming.Location(loc))
	if err != nil {
		return connect.Errorf("%s: the file name template can't be expressed in Spillway: %v", c.File, err)
	}
	if t.LatestPerKey() {
		templateFrom += "; one object per key, replaced by each flush with the key's latest record, as Aiven's key grouping: at-least-once, see docs/guarantees.md"
	}
	if strings.Contains(template, "{{timestamp") {
		templateFrom += "; NOT THE SAME {{timestamp}}: Spillway names a file after its first record's time and offset, Aiven renders each record's time with the partition's first offset"
		d.Warn("%s with {{timestamp}}: Spillway starts a file per time bucket, named after its first record's time and offset; Aiven's files of a later hour keep the start offset of the partition's first record, so those names differ", templateKey)
	}
	d.Set("file", "name_template", template, templateFrom)
	d.Set("file", "extension", extension, extFrom)
	return nil
}

// aivenExplain says why an Aiven key is not mapped.
func aivenExplain(key string, why func(string) string) string {
	switch {
	case key == "aws.credentials.provider":
		return why("Spillway uses the AWS SDK's default chain: environment variables, a profile (&profile=NAME in storage.url), or the instance's role")
	case strings.HasPrefix(key, "aws.s3.backoff."), key == "aws.sts.config.endpoint":
		return why("no Spillway setting: its retry backoff is capped exponential (storage.max_retries counts the retries), and STS is reached at its default endpoint")
	case key == "gcs.credentials.default":
		return why("Spillway uses Google's application default credentials unless GOOGLE_APPLICATION_CREDENTIALS names a file: nothing to do")
	case key == "gcs.endpoint":
		return why("NOT SUPPORTED as a setting: for an emulator set STORAGE_EMULATOR_HOST=host:port; other endpoints can't be set")
	case strings.HasPrefix(key, "gcs.retry."), strings.HasPrefix(key, "azure.retry."), strings.HasSuffix(key, ".user.agent"), key == "gcs.object.content.encoding":
		return why("no Spillway setting: storage.max_retries bounds retries; nothing else to do")
	case key == "kafka.retry.backoff.ms":
		return why("Connect's retry of a failed put; Spillway retries storage itself (storage.max_retries)")
	case key == "avro.codec":
		return why("Spillway's avro codec follows format.compression (gzip is deflate); for other formats it means nothing")
	case key == "format.output.fields.value.encoding":
		return why("Aiven applies it to csv only; for this format the value is written as the line format.value_encoding says")
	}
	return why("not a key Aiven's sink documents, or none Spillway needs; check it and set the matching Spillway key by hand if it mattered")
}
