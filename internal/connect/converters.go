package connect

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
)

// Connect's key.converter and value.converter turn a record's bytes into the
// value the connector stores. Spillway has no converters: it stores the
// bytes, or, with schema_registry, decodes the Confluent wire format itself.
// So each converter is either mapped (to schema_registry.* or to
// format.value_encoding), or said to store something else, or, when what
// the records hold can't be known, kept from turning into a silent skip of
// every record (see guardTolerance).

// ConvKind is what a converter makes of a record's bytes, as far as
// Spillway's mapping goes.
type ConvKind int

const (
	ConvWorker       ConvKind = iota // not set in the connector: the worker's, which the import can't see
	ConvBytes                        // ByteArrayConverter: the bytes
	ConvString                       // StringConverter: UTF-8 text
	ConvJSON                         // JsonConverter with schemas.enable=false: the JSON
	ConvJSONEnvelope                 // JsonConverter with schemas.enable=true: {"schema":..,"payload":..}
	ConvRegistry                     // Confluent's wire format: AvroConverter, ProtobufConverter, JsonSchemaConverter
	ConvOther                        // a converter with no mapping
)

// Converter is one of the connector's converters.
type Converter struct {
	part   string // "key" or "value"
	Key    string // "value.converter"
	class  string
	Kind   ConvKind
	schema string // ConvRegistry: Avro, Protobuf or JSON Schema
	// schemasSet is JsonConverter's schemas.enable, when the config sets it.
	schemasSet bool
	// unresolved is a registry converter whose registry this import could
	// not name (no URL, or a config provider reference).
	unresolved bool
}

// Schemas says how JsonConverter's schemas.enable is set.
func (v *Converter) Schemas() string {
	if v.Kind == ConvJSON {
		return " with " + v.Key + ".schemas.enable=false"
	}
	if v.schemasSet {
		return " with " + v.Key + ".schemas.enable=true"
	}
	return " (" + v.Key + ".schemas.enable not set: true, JsonConverter's default)"
}

// Shown names the converter as the connector config sets it.
func (v *Converter) Shown() string {
	if v.Kind == ConvWorker {
		return v.Key + " (not set)"
	}
	return v.Key + "=" + v.class
}

var registryConverters = map[string]string{
	"io.confluent.connect.avro.AvroConverter":         "Avro",
	"io.confluent.connect.protobuf.ProtobufConverter": "Protobuf",
	"io.confluent.connect.json.JsonSchemaConverter":   "JSON Schema",
}

var plainConverters = map[string]ConvKind{
	"org.apache.kafka.connect.converters.ByteArrayConverter": ConvBytes,
	"org.apache.kafka.connect.storage.StringConverter":       ConvString,
	"org.apache.kafka.connect.json.JsonConverter":            ConvJSON,
}

// converterClass resolves a class name, or one of the aliases Connect
// takes for it (the simple name, or the simple name without "Converter").
func converterClass(class string) (string, bool) {
	if _, ok := registryConverters[class]; ok {
		return class, true
	}
	if _, ok := plainConverters[class]; ok {
		return class, true
	}
	if strings.Contains(class, ".") || class == "" {
		return class, false
	}
	for full := range registryConverters {
		if simple := full[strings.LastIndexByte(full, '.')+1:]; class == simple || class+"Converter" == simple {
			return full, true
		}
	}
	for full := range plainConverters {
		if simple := full[strings.LastIndexByte(full, '.')+1:]; class == simple || class+"Converter" == simple {
			return full, true
		}
	}
	return class, false
}

// readConverters reads key.converter and value.converter, and the settings
// that decide what they make of the bytes (schemas.enable).
func readConverters(c *Connector) {
	c.Conv = map[string]*Converter{}
	for _, part := range []string{"key", "value"} {
		v := &Converter{part: part, Key: part + ".converter"}
		c.Conv[part] = v
		_, class, ok := c.Get(v.Key)
		if !ok || class == "" {
			v.Kind = ConvWorker
			continue
		}
		v.class = class
		full, known := converterClass(class)
		switch {
		case !known:
			v.Kind = ConvOther
		case registryConverters[full] != "":
			v.Kind, v.schema = ConvRegistry, registryConverters[full]
		default:
			v.Kind = plainConverters[full]
		}
		if v.Kind == ConvJSON {
			// JsonConverter's schemas.enable is true unless set false:
			// the records then hold {"schema":..,"payload":..}.
			_, se, set := c.Get(v.Key + ".schemas.enable")
			v.schemasSet = set
			if !strings.EqualFold(se, "false") {
				v.Kind = ConvJSONEnvelope
			}
		}
	}
}

// TextContent says, for a text format (jsonl, json), what Spillway writes for
// the value under this converter, and whether it is what the connector
// writes. It returns the comment for format.value_encoding's line and a
// warning, "" when the content is the same.
func (v *Converter) TextContent(product string) (comment, warning string) {
	who := "Aiven"
	if product == Confluent {
		who = "Confluent"
	}
	switch v.Kind {
	case ConvBytes:
		return v.Shown() + ": values as base64 strings, as " + who + " writes bytes", ""
	case ConvString:
		return v.Shown() + ": text as JSON strings, as " + who + "; NOT THE SAME for text that is itself JSON: Spillway embeds it as JSON, " + who + " writes it as a JSON string",
			fmt.Sprintf("%s: a value whose text is valid JSON is embedded as JSON by Spillway; %s writes it as a JSON string", v.Shown(), who)
	case ConvJSON:
		return v.Shown() + v.Schemas() + ": the JSON embedded as it is, as " + who + " writes it", ""
	case ConvJSONEnvelope:
		return v.Shown() + v.Schemas() + ": NOT THE SAME: " + who + " writes the payload, Spillway the whole {\"schema\":..,\"payload\":..} JSON of each record",
			fmt.Sprintf("%s%s: the records hold {\"schema\":...,\"payload\":...}; %s stores the payload, Spillway stores the whole envelope as the value (it has no way to take the payload out)", v.Shown(), v.Schemas(), who)
	case ConvRegistry:
		return v.Shown() + " decoded through schema_registry (below) and written as JSON; NOT THE SAME for some types: Spillway writes Avro's JSON encoding (bytes and decimals as strings of code points) or protojson (64-bit integers as strings), " + who + " Connect's JSON (bytes and decimals as base64)",
			fmt.Sprintf("%s: Spillway decodes the value through schema_registry.url and writes it as JSON its own way: bytes, decimal and (Protobuf) 64-bit integer fields are written differently from %s's JSON", v.Shown(), who)
	case ConvWorker:
		return "NOT KNOWN: " + v.Shown() + ", so the Connect worker's converter applies, which this import can't see; Spillway writes the value's bytes: JSON embedded, text as strings",
			workerWarning(v)
	}
	return "NOT SUPPORTED: " + v.Shown() + " has no Spillway mapping; Spillway writes the value's bytes: JSON embedded, text as strings, anything else a record error",
		otherWarning(v)
}

// TypedContent is TextContent for avro and parquet.
func (v *Converter) TypedContent(product, typ string) (comment, warning string) {
	who := "Aiven"
	shape := "the value field is typed by the registered schema, where Aiven types it by the Connect schema made from it"
	if product == Confluent {
		who = "Confluent"
		shape = "the file is typed by the registered schema (its fields are the " + typ + " columns), where Confluent types it by the Connect schema made from it"
	}
	switch v.Kind {
	case ConvBytes:
		if product == Confluent {
			return v.Shown() + ": value_encoding base64 makes a bytes field; NOT THE SAME: Confluent's files have the schema \"bytes\", Spillway's records of one bytes field, value",
				fmt.Sprintf("%s with format.class %s: Spillway's %s records have one bytes field, value; Confluent's %s schema is \"bytes\" itself", v.Shown(), typ, typ, typ)
		}
		return v.Shown() + ": value_encoding base64 makes value a bytes field, as Aiven writes bytes", ""
	case ConvString:
		if product == Confluent {
			return v.Shown() + ": a string field; NOT THE SAME: Confluent's files have the schema \"string\", Spillway's records of one string field, value",
				fmt.Sprintf("%s with format.class %s: Spillway's %s records have one string field, value; Confluent's %s schema is \"string\" itself", v.Shown(), typ, typ, typ)
		}
		return v.Shown() + ": value is a string field, as Aiven writes strings", ""
	case ConvJSON:
		return v.Shown() + v.Schemas() + ": NOT THE SAME: Spillway writes each value's JSON as a string field, value; " + who + " has no schema to type it by",
			fmt.Sprintf("%s%s and %s output: Spillway writes each value's JSON as a string field (value); %s has no schema for it", v.Shown(), v.Schemas(), typ, who)
	case ConvJSONEnvelope:
		return v.Shown() + v.Schemas() + ": NOT THE SAME: " + who + " types the payload by the schema in each record; Spillway writes the whole {\"schema\":..,\"payload\":..} JSON as a string field, value",
			fmt.Sprintf("%s%s: %s types each record's payload by its inline schema; Spillway writes the whole {\"schema\":...,\"payload\":...} JSON as a string field (value)", v.Shown(), v.Schemas(), who)
	case ConvRegistry:
		c := v.Shown() + " decoded through schema_registry (below): " + shape
		if v.schema != "Avro" {
			return c + "; NOT THE SAME types: Spillway maps " + v.schema + " onto Avro its own way (docs/formats.md), Connect its own",
				fmt.Sprintf("%s: Spillway maps each %s schema onto %s columns its own way (docs/formats.md); field names and types may differ from %s's Connect schema", v.Shown(), v.schema, typ, who)
		}
		return c, ""
	case ConvWorker:
		return "NOT KNOWN: " + v.Shown() + ", so the Connect worker's converter applies, which this import can't see; Spillway writes the value's bytes as a string field (binary, such as the wire format, is a record error)",
			workerWarning(v)
	}
	return "NOT SUPPORTED: " + v.Shown() + " has no Spillway mapping; Spillway writes the value's bytes as a string field (binary is a record error)",
		otherWarning(v)
}

func workerWarning(v *Converter) string {
	return fmt.Sprintf("%s: the Connect worker's converter applies and this import can't see it; Spillway stores the %s's bytes. If the worker's is AvroConverter, ProtobufConverter or JsonSchemaConverter, set schema_registry.url (and decode); if JsonConverter with schemas.enable=true (Kafka's sample worker config), the connector stored the payload and Spillway stores the whole {\"schema\":...,\"payload\":...}", v.Shown(), v.part)
}

func otherWarning(v *Converter) string {
	return fmt.Sprintf("%s: no Spillway mapping; Spillway stores the %s's bytes instead of what this converter makes of them", v.Shown(), v.part)
}

// unmappable reports a converter of a part that is stored and whose bytes
// Spillway may be unable to write: with errors.tolerance=all each such
// record would be skipped.
func (v *Converter) unmappable() bool {
	return v.Kind == ConvWorker || v.Kind == ConvOther || (v.Kind == ConvRegistry && v.unresolved)
}

// importRegistry maps the registry converters of the stored parts to
// schema_registry.*, and says what happens to the converters of parts that
// are not stored.
func importRegistry(c *Connector, d *Doc) error {
	var parts []*Converter
	for _, part := range []string{"value", "key"} {
		v := c.Conv[part]
		if v.Kind != ConvRegistry {
			continue
		}
		if !c.Stored[part] {
			c.useConverterSettings(d, v.Key)
			d.NotMapped(c.Shown(v.Key) + ": the " + part + " is not written with this config, so it is not decoded")
			continue
		}
		parts = append(parts, v)
	}
	if len(parts) == 0 {
		return nil
	}
	var eps []registryEndpoint
	for _, v := range parts {
		ep, err := c.registryURL(v)
		if err != nil {
			return err
		}
		c.registryAuth(d, v, &ep)
		c.useConverterSettings(d, v.Key)
		eps = append(eps, ep)
	}
	ep := eps[0]
	if len(eps) == 2 {
		var err error
		if ep, err = c.oneRegistry(d, eps[0], eps[1]); err != nil {
			return err
		}
	}
	if ep.url == "" {
		ep.url = "http://127.0.0.1:8081"
		d.Warn("%s: the schema registry's URL is not known (%s); schema_registry.url is a stand-in to replace, and errors.tolerance is none so that a wrong registry stops the run instead of skipping every record", parts[0].Shown(), strings.TrimPrefix(ep.from, "SET THIS: "))
	}
	d.Set("schema_registry", "url", ep.url, ep.from)
	decode, decodeFrom := parts[0].part, parts[0].Shown()+": "+parts[0].schema+" in the Confluent wire format"
	if len(parts) == 2 {
		decode = "both"
		decodeFrom = fmt.Sprintf("%s (%s) and %s (%s): both in the Confluent wire format", parts[0].Shown(), parts[0].schema, parts[1].Shown(), parts[1].schema)
	}
	d.Set("schema_registry", "decode", decode, decodeFrom)
	if ep.user != "" {
		d.Set("schema_registry", "username", ep.user, "from "+ep.userFrom)
		d.Credential("SPILLWAY_SCHEMA_REGISTRY_PASSWORD", "the password in "+ep.pass)
	}
	return nil
}

// registryEndpoint is where a converter's schema registry is, and who it
// logs in as.
type registryEndpoint struct {
	url, from  string
	user, pass string // pass is the key the password came from
	userFrom   string
}

// registryURL reads the converter's schema.registry.url.
func (c *Connector) registryURL(v *Converter) (registryEndpoint, error) {
	var ep registryEndpoint
	urlKey, raw, _ := c.Get(v.Key + ".schema.registry.url")
	switch {
	case raw == "":
		v.unresolved = true
		ep.from = "SET THIS: " + v.Shown() + " has no " + v.Key + ".schema.registry.url"
	case strings.Contains(raw, "${"):
		v.unresolved = true
		ep.from = "SET THIS: " + urlKey + " is a Connect config provider reference; resolve it"
	default:
		urls := List(raw)
		u, err := url.Parse(urls[0])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return ep, Errorf("%s: %s=%q is not an http:// or https:// URL", c.File, urlKey, urls[0])
		}
		ep.from = "from " + v.Shown() + ", " + urlKey
		if len(urls) > 1 {
			ep.from += fmt.Sprintf(" (its first URL: Spillway takes one; %s not used)", strings.Join(urls[1:], ", "))
		}
		if u.User != nil {
			// Credentials in the URL are basic.auth.credentials.source
			// URL's (the default); Spillway takes them apart.
			ep.user, ep.pass, ep.userFrom = u.User.Username(), urlKey, "the user in "+urlKey
			u.User = nil
		}
		ep.url = u.String()
	}
	return ep, nil
}

// registryAuth reads the converter's basic.auth settings into ep.
func (c *Connector) registryAuth(d *Doc, v *Converter, ep *registryEndpoint) {
	srcKey, src, _ := c.Get(v.Key+".basic.auth.credentials.source", v.Key+".schema.registry.basic.auth.credentials.source")
	infoKey, info, infoSet := c.Get(v.Key+".basic.auth.user.info", v.Key+".schema.registry.basic.auth.user.info")
	switch strings.ToUpper(src) {
	case "", "URL":
		if infoSet {
			d.NotMapped(c.Shown(infoKey) + ": not read by the converter: basic.auth.credentials.source is URL (the default)")
		}
	case "USER_INFO":
		switch {
		case !infoSet || info == "":
			d.NotMapped(srcKey + "=USER_INFO without " + v.Key + ".basic.auth.user.info: set schema_registry.username and SPILLWAY_SCHEMA_REGISTRY_PASSWORD")
		case strings.Contains(info, "${"):
			d.NotMapped(c.Shown(infoKey) + ": a Connect config provider reference; set schema_registry.username and SPILLWAY_SCHEMA_REGISTRY_PASSWORD to what it resolves to")
		default:
			user, _, _ := strings.Cut(info, ":")
			ep.user, ep.pass, ep.userFrom = user, infoKey, "the user in "+infoKey+" ("+srcKey+"=USER_INFO)"
		}
	case "SASL_INHERIT":
		if u := d.lookup("kafka", "sasl.username"); u != "" {
			ep.user, ep.pass, ep.userFrom = u, "the Kafka SASL password ("+srcKey+"=SASL_INHERIT)", "kafka.sasl.username ("+srcKey+"=SASL_INHERIT)"
		} else {
			d.NotMapped(srcKey + "=SASL_INHERIT: the worker's SASL credentials; set schema_registry.username and SPILLWAY_SCHEMA_REGISTRY_PASSWORD to them")
		}
	default:
		d.NotMapped(c.Shown(srcKey) + ": not URL, USER_INFO or SASL_INHERIT; set schema_registry.username and SPILLWAY_SCHEMA_REGISTRY_PASSWORD by hand")
	}
}

// oneRegistry makes the value's and the key's registry one: Spillway reads
// both through one schema_registry.url, as one user.
func (c *Connector) oneRegistry(d *Doc, a, b registryEndpoint) (registryEndpoint, error) {
	ep := a
	if a.url != "" && b.url != "" && a.url != b.url {
		return ep, Errorf("%s: value.converter and key.converter use two schema registries (%s, %s); Spillway reads keys and values through one, schema_registry.url", c.File, a.url, b.url)
	}
	if a.url == "" {
		ep = b
	}
	ep.from = strings.TrimPrefix(a.from, "from ") + "; " + strings.TrimPrefix(b.from, "from ")
	if a.url != "" && b.url != "" {
		ep.from = "from " + ep.from
	}
	switch {
	case ep.user == "":
		ep.user, ep.pass, ep.userFrom = b.user, b.pass, b.userFrom
	case b.user == ep.user:
		ep.userFrom += "; " + b.userFrom
	case b.user != "":
		d.NotMapped(b.userFrom + ": another user than " + ep.userFrom + "; Spillway sends one user to the registry, " + ep.user)
	}
	return ep, nil
}

// useConverterSettings marks a converter's settings as used, and explains
// those that matter and have no mapping; the others are left to explain.
func (c *Connector) useConverterSettings(d *Doc, conv string) {
	bearer := ""
	for _, k := range c.unused() {
		rest, ok := strings.CutPrefix(k, conv+".")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "schema.registry.ssl.truststore."):
			d.NotMapped(c.Shown(k) + ": Spillway reads PEM files, not Java key stores; export the registry's CA certificate as PEM and set schema_registry.tls.ca_file")
		case strings.HasPrefix(rest, "schema.registry.ssl.keystore."), rest == "schema.registry.ssl.key.password":
			d.NotMapped(c.Shown(k) + ": Spillway reads PEM files, not Java key stores; export the client certificate and key as PEM and set schema_registry.tls.cert_file and schema_registry.tls.key_file")
		case strings.HasPrefix(rest, "bearer.auth."):
			d.NotMapped(c.Shown(k) + ": NOT SUPPORTED: Spillway authenticates to the registry with basic auth only (schema_registry.username and password)")
			bearer = k
		default:
			continue
		}
		c.Use(k)
	}
	if bearer != "" {
		d.Warn("%s: bearer authentication to the schema registry is not supported; Spillway sends basic auth or none, and waits while the registry refuses it", bearer)
	}
}

// guardTolerance keeps errors.tolerance=all from turning a converter this
// import can't map into a skip of every record: Spillway can't write what
// it can't decode, and with all (or a dead-letter topic, which Spillway
// uses whatever the tolerance) each such record would be dropped while the
// run exits 0. Otherwise it says what all does in Spillway.
func guardTolerance(c *Connector, d *Doc) {
	if d.lookup("errors", "tolerance") != "all" {
		return
	}
	var bad []string
	for _, part := range []string{"value", "key"} {
		if v := c.Conv[part]; c.Stored[part] && v.unmappable() {
			if v.unresolved {
				bad = append(bad, v.Shown()+" (its registry is not known)")
			} else {
				bad = append(bad, v.Shown())
			}
		}
	}
	dlq := d.lookup("errors", "dead_letter_topic")
	if len(bad) > 0 {
		d.Set("errors", "tolerance", "none", "NOT THE SAME: errors.tolerance=all is not imported, because "+strings.Join(bad, " and ")+
			" can't be mapped: Spillway might be unable to write any record, and all would skip them all. none stops the run at the first record it can't write; once the records are decoded as they should be, set all")
		what := "errors.tolerance: none"
		if dlq != "" {
			d.unset("errors", "dead_letter_topic")
			d.NotMapped(c.Shown("errors.deadletterqueue.topic.name") + ": not imported with errors.tolerance none (see errors.tolerance): Spillway would send every record it can't write there")
			what += " and no dead-letter topic"
		}
		d.Warn("errors.tolerance=all is not imported: %s can't be mapped, and Spillway would skip (or dead-letter) every record it can't decode while the run exits 0; the config has %s, so the first such record stops the run. Map the converter, then set errors.tolerance: all", strings.Join(bad, " and "), what)
		return
	}
	where := "logged, counted (spillway_records_skipped_total) and not stored"
	if dlq != "" {
		where = "logged and sent to " + dlq + " with the cause in headers"
	}
	d.Note("errors", "tolerance", ": a record Spillway can't write is skipped, and the offsets past it committed")
	d.Warn("errors.tolerance=all: Spillway skips every record it can't write (not in the wire format, an unknown schema id, binary bytes with value_encoding none, a tombstone in a typed file): each is %s, and the run goes on and exits 0. Connect's tolerance covered what its converters and transforms failed on. Set errors.tolerance: none to stop at the first such record instead", where)
}

// KeyContent says what Spillway writes for the key under key.converter,
// given the value_encoding the value's converter decided: on the YAML's
// last lines when it is the same, as a warning when it is not.
func KeyContent(c *Connector, d *Doc, product, typ, enc string) {
	v := c.Conv["key"]
	if v.Kind == ConvWorker && !c.Stored["key"] {
		return
	}
	if !c.Stored["key"] {
		if v.Kind != ConvRegistry { // importRegistry says it for those
			d.NotMapped(v.Shown() + ": the key is not written with this config")
		}
		return
	}
	if v.Kind == ConvRegistry {
		return // decoded: importRegistry names it
	}
	who := "Aiven"
	if product == Confluent {
		who = "Confluent"
	}
	same := func(s string) { d.NotMapped(v.Shown() + ": " + s) }
	differ := func(s, w string) {
		same("NOT THE SAME: " + s)
		d.Warn("%s: %s", v.Shown(), w)
	}
	kind := formats.Of(typ)
	text := kind.JSONRecords
	switch {
	case kind.Name == format.CSV().Name:
		same("Spillway writes keys in base64 in csv, as " + who + ", whatever the converter")
	case v.Kind == ConvWorker:
		same("NOT KNOWN: the Connect worker's converter applies, which this import can't see; Spillway writes the key's bytes")
		d.Warn("%s", workerWarning(v))
	case v.Kind == ConvOther:
		differ("no Spillway mapping; Spillway writes the key's bytes", otherWarning(v))
	case v.Kind == ConvBytes && enc == "base64":
		same("keys as bytes (base64 in text formats), as " + who + " writes them")
	case v.Kind == ConvBytes:
		differ("Spillway writes keys as text strings, since value_encoding is none for the values; "+who+" writes bytes (base64), and a key that is not UTF-8 is a record error",
			"Spillway writes keys as text (format.value_encoding none follows value.converter), where "+who+" writes bytes; a key that is not UTF-8 is a record error")
	case enc == "base64":
		differ("Spillway writes keys as bytes (base64 in text formats), since value_encoding is base64 for the values; "+who+" writes text",
			"Spillway writes keys as bytes (format.value_encoding base64 follows value.converter), where "+who+" writes text")
	case v.Kind == ConvString:
		same("keys as text strings, as " + who + " writes them")
	case v.Kind == ConvJSON && text:
		differ(v.Key+".schemas.enable=false: Spillway writes keys as strings holding their JSON; "+who+" embeds a JSON key (an object stays an object)",
			"Spillway writes each key as a string holding its JSON, where "+who+" embeds the JSON")
	case v.Kind == ConvJSON:
		same(v.Key + ".schemas.enable=false: keys as strings holding their JSON")
	default: // ConvJSONEnvelope
		differ("Spillway writes the whole {\"schema\":..,\"payload\":..} JSON of each key as a string"+v.Schemas()+"; "+who+" the payload",
			"the keys hold {\"schema\":...,\"payload\":...}"+v.Schemas()+"; Spillway writes all of it as a string, where "+who+" writes the payload")
	}
}
