// Package icebergsink holds `spillway config import`'s rules for Apache
// Iceberg's Kafka Connect sink (org.apache.iceberg.connect.IcebergSinkConnector,
// and Tabular's io.tabular.iceberg.connect.IcebergSinkConnector before it
// was donated): its table, catalog, partitioning and commit keys become
// Spillway's iceberg section.
//
// The connector coordinates its workers over a control topic and keeps
// its progress in each snapshot's summary; Spillway needs neither, so the
// control keys are explained, not mapped, and the cut-over comments say
// where the connector's progress is.
package icebergsink

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/connect"
)

// Sinks are the connector classes of Apache Iceberg's sink, for
// connect.Import.
func Sinks() []connect.Sink {
	sink := func(class, title string) connect.Sink {
		return connect.Sink{Class: class, Product: connect.Iceberg, Title: title, Map: importIceberg, Explain: explain}
	}
	return []connect.Sink{
		sink("org.apache.iceberg.connect.IcebergSinkConnector", "Apache Iceberg's Kafka Connect sink"),
		sink("io.tabular.iceberg.connect.IcebergSinkConnector", "Tabular's Iceberg Kafka Connect sink (now Apache Iceberg's)"),
	}
}

// controlTopic is the connector's default iceberg.control.topic.
const controlTopic = "control-iceberg"

func importIceberg(c *connect.Connector, d *connect.Doc) error {
	if err := table(c, d); err != nil {
		return err
	}
	c.Stored["value"] = true
	for _, k := range []string{"key.converter", "value.converter", "value.converter.schemas.enable", "key.converter.schemas.enable"} {
		if _, ok := c.Peek(k); ok {
			c.Use(k)
			d.NotMapped(c.Shown(k) + ": NOT THE SAME: the connector makes the table's columns from the converted record; Spillway's columns are its record envelope (format.fields), typed by the schema registry when one is set (docs/iceberg.md)")
		}
	}
	what := "an Iceberg table's data files are Parquet: Spillway writes and registers them itself"
	if v, ok := c.Peek("format.type"); ok && strings.EqualFold(strings.TrimSpace(v), "parquet") {
		c.Use("format.type")
		what = "from format.type"
	}
	d.Set("format", "type", "parquet", what)
	catalog(c, d)
	partitionBy(c, d)
	for _, b := range []struct{ key, to string }{
		{"iceberg.tables.auto-create-enabled", "auto_create"},
		{"iceberg.tables.evolve-schema-enabled", "evolve_schema"},
	} {
		if _, v, ok := c.Get(b.key); ok {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return connect.Errorf("%s: %s=%q is not true or false", c.File, b.key, v)
			}
			d.Set("iceberg", b.to, on, "from "+b.key)
		} else {
			// The connector's default is false for both; Spillway's is true.
			d.Set("iceberg", b.to, false, b.key+" not set: false, the connector's default")
		}
	}
	if key, v, ok := c.Get("iceberg.control.commit.interval-ms"); ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return connect.Errorf("%s: %s=%q is not a positive number of milliseconds", c.File, key, v)
		}
		d.Set("iceberg", "commit_interval", (time.Duration(ms) * time.Millisecond).String(), "from "+key+"; Spillway also commits earlier when the pending files pass 4 × file.max_bytes")
	} else {
		d.Set("iceberg", "commit_interval", "5m0s", "iceberg.control.commit.interval-ms not set: 300000, the connector's default")
	}
	topic := controlTopic
	if v, ok := c.Peek("iceberg.control.topic"); ok && strings.TrimSpace(v) != "" {
		topic = strings.TrimSpace(v)
	}
	group := d.Lookup("kafka", "group")
	if _, v, ok := c.Get("iceberg.connect.group-id"); ok && v != "" {
		group = v
		d.Set("kafka", "group", v, "from iceberg.connect.group-id: the group whose offsets the connector commits with each table commit")
	}
	d.Note("kafka", "group", fmt.Sprintf(
		"; CUT-OVER: the connector's progress is in each table's snapshot summaries, kafka.connect.offsets.%s.%s; stop the connector after its last snapshot and check that %s's committed offsets match it before starting Spillway, which keeps its own progress under its own summary keys",
		topic, group, group))
	d.Warn("iceberg.tables: the connector's table progress is in its snapshot summaries (kafka.connect.offsets.%s.%s), under keys Spillway does not read: Spillway starts at group %s's committed offsets, so let the connector commit its last snapshot and stop it before the cut-over", topic, group, group)
	return nil
}

// Sets of the connector's table keys that Spillway can't express.
func table(c *connect.Connector, d *connect.Doc) error {
	if _, v, ok := c.Get("iceberg.tables.dynamic-enabled"); ok && strings.EqualFold(v, "true") {
		_, field, _ := c.Get("iceberg.tables.route-field")
		d.NotMapped(fmt.Sprintf("iceberg.tables.dynamic-enabled=true (route-field %q): NOT SUPPORTED; Spillway picks the table by topic only: use iceberg.table: ns.{{topic}}, or one topic per table upstream", field))
		d.Warn("iceberg.tables.dynamic-enabled=true: Spillway routes by topic, not by the record's field %q; iceberg.table must be set by hand", field)
		d.Set("iceberg", "table", "SET-THIS.{{topic}}", "SET THIS: the connector routed by a record field, which Spillway can't; one table per topic, or one Spillway config per table")
		return nil
	}
	key, v, ok := c.Get("iceberg.tables")
	tables := connect.List(v)
	switch {
	case !ok || len(tables) == 0:
		return connect.Errorf("%s: iceberg.tables is not set (and iceberg.tables.dynamic-enabled is not true); the connector needs one", c.File)
	case len(tables) == 1:
		d.Set("iceberg", "table", tables[0], "from "+key)
	default:
		d.NotMapped(fmt.Sprintf("%s=%s: NOT SUPPORTED as one config; the connector writes every record to each table (or routes by iceberg.tables.route-field): write one Spillway config per table, or use iceberg.table: ns.{{topic}} for one table per topic", key, v))
		d.Warn("%s names %d tables: Spillway writes to one table per config; this YAML writes to %s only", key, len(tables), tables[0])
		d.Set("iceberg", "table", tables[0], fmt.Sprintf("the first of %s; the others need their own Spillway config", key))
	}
	for _, k := range []string{"iceberg.tables.route-field", "iceberg.tables.route-regex"} {
		if _, ok := c.Peek(k); ok {
			c.Use(k)
			d.NotMapped(c.Shown(k) + ": NOT SUPPORTED; Spillway routes every record of a topic to iceberg.table: one Spillway config per table, or iceberg.table: ns.{{topic}}")
		}
	}
	return nil
}

// catalogURL is a SQLite JDBC URL: jdbc:sqlite:PATH.
var sqliteURL = regexp.MustCompile(`^jdbc:sqlite:(?:file:)?(.+)$`)

// glueCatalogImpl is the Java class of Apache Iceberg's Glue catalog.
const glueCatalogImpl = "org.apache.iceberg.aws.glue.GlueCatalog"

func catalog(c *connect.Connector, d *connect.Doc) {
	_, typ, _ := c.Get("iceberg.catalog.type")
	if impl, ok := c.Peek("iceberg.catalog.catalog-impl"); ok && strings.TrimSpace(impl) == glueCatalogImpl && typ == "" {
		c.Use("iceberg.catalog.catalog-impl")
		typ = "glue"
	}
	_, uri, hasURI := c.Get("iceberg.catalog.uri")
	switch strings.ToLower(typ) {
	case "glue":
		glue(c, d, uri, hasURI)
	case "rest":
		d.Set("iceberg", "catalog.type", "rest", "from iceberg.catalog.type")
		if hasURI {
			d.Set("iceberg", "catalog.uri", uri, "from iceberg.catalog.uri")
		}
	case "jdbc":
		if m := sqliteURL.FindStringSubmatch(uri); m != nil {
			d.Set("iceberg", "catalog.type", "sql", "from iceberg.catalog.type=jdbc with a SQLite URL")
			d.Set("iceberg", "catalog.uri", m[1], "the SQLite file of iceberg.catalog.uri")
		} else {
			d.NotMapped(fmt.Sprintf("iceberg.catalog.type=jdbc with iceberg.catalog.uri %s: NOT SUPPORTED; Spillway's sql catalog is a SQLite file; serve the catalog over REST (iceberg.catalog.type: rest)", redact(uri)))
			d.Warn("iceberg.catalog.type=jdbc: only a jdbc:sqlite: URL maps; set iceberg.catalog by hand")
			return
		}
	default:
		t := typ
		if t == "" {
			t = "(not set: iceberg.catalog-impl or the default)"
		}
		d.NotMapped(fmt.Sprintf("iceberg.catalog.type=%s: NOT SUPPORTED; Spillway's catalogs are rest, glue and sql (SQLite): serve the catalog over REST (Nessie, Polaris and others do) and set iceberg.catalog.type: rest and iceberg.catalog.uri", t))
		d.Warn("iceberg.catalog.type=%s can't be mapped: set iceberg.catalog.type and iceberg.catalog.uri by hand", t)
		if hasURI {
			d.NotMapped(c.Shown("iceberg.catalog.uri") + ": the URI of a catalog Spillway can't reach; set iceberg.catalog.uri to its REST endpoint")
		}
	}
	if d.Lookup("iceberg", "catalog.type") == "" {
		d.Set("iceberg", "catalog.type", "rest", "SET THIS: the connector's catalog can't be mapped (see the comments at the end); serve it over REST")
		d.Set("iceberg", "catalog.uri", "https://SET-THIS.invalid", "SET THIS: the REST catalog's URL")
	}
	if _, v, ok := c.Get("iceberg.catalog.warehouse"); ok && v != "" {
		from := "from iceberg.catalog.warehouse"
		if w, ok := strings.CutPrefix(v, "s3a://"); ok {
			v, from = "s3://"+w, from+" (s3a:// is Hadoop's name for s3://)"
		}
		d.Set("iceberg", "catalog.warehouse", v, from)
		if u, ok := storageURL(v); ok {
			d.Set("storage", "url", u, "the warehouse's bucket: Spillway writes the data files there, under each table's location")
		}
	}
	if d.Lookup("storage", "url") == "" {
		d.Set("storage", "url", "file:///SET-THIS", "SET THIS: the bucket of the tables' locations (s3://bucket, gs://bucket); Spillway writes the data files there")
	}
	for _, cr := range []struct{ key, env string }{
		{"iceberg.catalog.credential", "SPILLWAY_ICEBERG_CATALOG_CREDENTIAL"},
		{"iceberg.catalog.token", "SPILLWAY_ICEBERG_CATALOG_TOKEN"},
	} {
		if _, _, ok := c.Get(cr.key); ok {
			d.Credential(cr.env, cr.key)
		}
	}
}

// storageURL is the bucket of a warehouse location, as Spillway's
// storage.url, when the warehouse is one (a REST catalog's warehouse is
// often a name instead).
func storageURL(w string) (string, bool) {
	for _, p := range []struct{ from, to string }{{"s3://", "s3://"}, {"gs://", "gs://"}} {
		if rest, ok := strings.CutPrefix(w, p.from); ok {
			bucket, _, _ := strings.Cut(rest, "/")
			return p.to + bucket, bucket != ""
		}
	}
	if strings.HasPrefix(w, "file:/") {
		return w, true
	}
	return "", false
}

func redact(uri string) string {
	if i := strings.Index(uri, "password="); i >= 0 {
		return uri[:i] + "password=REDACTED"
	}
	return uri
}

// timeTransform is one of the connector's time transforms: hours(ts) or
// hour(ts), as Iceberg's Java names them both.
var timeTransform = regexp.MustCompile(`^(year|month|day|hour)s?\(\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\)$`)

// partitionBy maps the time transforms Spillway supports; Spillway's are of
// the Kafka record's timestamp, so a transform of another field is said
// to differ.
func partitionBy(c *connect.Connector, d *connect.Doc) {
	key, v, ok := c.Get("iceberg.tables.default-partition-by")
	if !ok || v == "" {
		return
	}
	var out []string
	for _, p := range splitTransforms(v) {
		m := timeTransform.FindStringSubmatch(p)
		if m == nil {
			d.NotMapped(fmt.Sprintf("%s: %s is NOT SUPPORTED; Spillway partitions by year, month, day or hour of the record's timestamp only", key, p))
			d.Warn("%s: %s can't be mapped: the table is not partitioned by it", key, p)
			continue
		}
		out = append(out, m[1]+"(timestamp)")
		// Even a field named timestamp is the record value's, not Kafka's.
		d.Warn("%s: %s becomes %s(timestamp): Spillway partitions by the Kafka record's timestamp, not the value's field %s", key, p, m[1], m[2])
	}
	if len(out) == 0 {
		return
	}
	d.Set("iceberg", "partition_by", out, "from "+key+" (of the Kafka record's timestamp, which is what Spillway's time transforms read)")
	d.Set("file", "timestamp_source", "event", "iceberg.partition_by's time transforms need each file's records from one period")
	d.Set("file", "timezone", "UTC", "Iceberg's time transforms are in UTC")
}

// splitTransforms splits at commas outside parentheses (bucket[4](id)
// and truncate(4, id) hold commas), as the connector does.
func splitTransforms(v string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range v {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				if s := strings.TrimSpace(v[start:i]); s != "" {
					out = append(out, s)
				}
				start = i + 1
			}
		}
	}
	if s := strings.TrimSpace(v[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// glue maps Apache Iceberg's Glue catalog properties (its AWS module's
// names: client.region, glue.id, glue.endpoint) to Spillway's glue keys.
// The Glue client's own credentials properties are not read: Spillway
// takes the AWS default chain, as the Java client does by default.
func glue(c *connect.Connector, d *connect.Doc, uri string, hasURI bool) {
	d.Set("iceberg", "catalog.type", "glue", "from iceberg.catalog.type=glue or iceberg.catalog.catalog-impl="+glueCatalogImpl)
	if _, v, ok := c.Get("iceberg.catalog.client.region"); ok && v != "" {
		d.Set("iceberg", "catalog.region", v, "from iceberg.catalog.client.region")
	}
	if _, v, ok := c.Get("iceberg.catalog.glue.id"); ok && v != "" {
		d.Set("iceberg", "catalog.catalog_id", v, "from iceberg.catalog.glue.id")
	}
	if _, v, ok := c.Get("iceberg.catalog.glue.endpoint"); ok && v != "" {
		d.Set("iceberg", "catalog.uri", v, "from iceberg.catalog.glue.endpoint: Glue's endpoint only")
	} else if hasURI && uri != "" {
		d.NotMapped(c.Shown("iceberg.catalog.uri") + ": a Glue catalog has no URI; Glue's endpoint is iceberg.catalog.glue.endpoint (iceberg.catalog.uri in Spillway)")
	}
	if _, v, ok := c.Get("iceberg.catalog.glue.skip-archive"); ok && v != "" {
		d.Set("iceberg", "catalog.properties", []string{"glue.skip-archive=" + v}, "from iceberg.catalog.glue.skip-archive")
	}
	if _, _, ok := c.Get("iceberg.catalog.glue.lakeformation-enabled"); ok {
		d.NotMapped(c.Shown("iceberg.catalog.glue.lakeformation-enabled") + ": NOT SUPPORTED; iceberg-go's Glue client does not vend Lake Formation credentials: grant Spillway's AWS credentials the table's S3 location and Glue's table permissions")
	}
	if _, _, ok := c.Get("iceberg.catalog.client.credentials-provider"); ok {
		d.NotMapped(c.Shown("iceberg.catalog.client.credentials-provider") + ": NOT SUPPORTED as a class; Spillway takes the AWS default chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity, the instance's role)")
	}
}

// explain says why a key of the Iceberg sink has no line in the YAML.
func explain(key string, why func(string) string) string {
	switch {
	case key == "format.type" || key == "iceberg.tables.write-props.write.format.default":
		return why("NOT SUPPORTED: Spillway writes Parquet data files only; format.type is parquet")
	case strings.HasPrefix(key, "iceberg.control.") || strings.HasPrefix(key, "iceberg.coordinator") || key == "iceberg.kafka" || strings.HasPrefix(key, "iceberg.kafka."):
		return why("Spillway needs no control topic or coordinator: each instance commits its own files to the table, with the offsets they hold in the snapshot; nothing to do")
	case key == "iceberg.tables.default-id-columns" || strings.HasSuffix(key, ".id-columns") || key == "iceberg.tables.upsert-mode-enabled" || key == "iceberg.tables.cdc-field":
		return why("NOT SUPPORTED: Spillway appends; it has no upsert or delete files")
	case key == "iceberg.tables.default-commit-branch" || strings.HasSuffix(key, ".commit-branch"):
		return why("NOT SUPPORTED: Spillway commits to the table's main branch")
	case strings.HasPrefix(key, "iceberg.tables.auto-create-props.") || strings.HasPrefix(key, "iceberg.tables.write-props.") || strings.HasPrefix(key, "iceberg.table."):
		return why("no Spillway setting: set table properties with your catalog's tools after Spillway creates the table")
	case key == "iceberg.tables.schema-force-optional" || key == "iceberg.tables.schema-case-insensitive":
		return why("no Spillway setting: Spillway's columns are optional and matched by name as written")
	case strings.HasPrefix(key, "iceberg.catalog.") || key == "iceberg.catalog" || strings.HasPrefix(key, "iceberg.hadoop"):
		return why("a catalog or FileIO property: if your catalog needs it, add it to iceberg.catalog.properties as name=value (iceberg-go's names)")
	}
	return why("a setting Spillway doesn't have; check docs/iceberg.md")
}
