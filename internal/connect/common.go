package connect

import (
	"fmt"
	"regexp"
	"strings"
)

// importKafka maps what Connect's consumer needs: the group, the topics,
// and the consumer overrides a connector may carry.
func importKafka(c *Connector, d *Doc) error {
	const o = "consumer.override."
	if _, v, ok := c.Get(o + "bootstrap.servers"); ok {
		d.Set("kafka", "brokers", List(v), "from "+o+"bootstrap.servers")
	} else {
		d.Set("kafka", "brokers", []string{"127.0.0.1:9092"}, "SET THIS: the Connect worker's bootstrap.servers (or SPILLWAY_KAFKA_BROKERS)")
	}
	if _, v, ok := c.Get(o + "group.id"); ok {
		d.Set("kafka", "group", v, "from "+o+"group.id: the connector's group, so Spillway continues from its commits")
	} else {
		d.Set("kafka", "group", "connect-"+c.name, "Kafka Connect's group for connector \""+c.name+"\": Spillway continues from its commits")
	}
	if _, v, ok := c.Get("topics"); ok {
		d.Set("kafka", "topics", List(v), "from topics")
	}
	if _, v, ok := c.Get("topics.regex"); ok {
		d.Set("kafka", "topic_regex", v, "from topics.regex; Spillway's regexps are Go's (RE2): no lookaround or backreferences")
	}
	if d.lookup("kafka", "topics") == "" && d.lookup("kafka", "topic_regex") == "" {
		return Errorf("%s: neither topics nor topics.regex is set; a sink connector needs one", c.File)
	}
	if _, v, ok := c.Get(o + "auto.offset.reset"); ok {
		switch v {
		case "earliest", "latest":
			d.Set("kafka", "start_offset", v, "from "+o+"auto.offset.reset")
		default:
			d.Set("kafka", "start_offset", "earliest", fmt.Sprintf("%sauto.offset.reset=%s is NOT SUPPORTED: Spillway takes earliest or latest for a partition without a commit", o, v))
		}
	}
	if _, v, ok := c.Get(o + "security.protocol"); ok {
		switch strings.ToUpper(v) {
		case "SSL", "SASL_SSL":
			d.Set("kafka", "tls.enabled", true, "from "+o+"security.protocol="+v)
		case "PLAINTEXT", "SASL_PLAINTEXT":
		default:
			d.NotMapped(fmt.Sprintf("%ssecurity.protocol=%s: not a protocol Spillway knows; set kafka.tls and kafka.sasl by hand", o, v))
		}
	}
	if _, v, ok := c.Get(o + "sasl.mechanism"); ok {
		switch m := strings.ToUpper(v); m {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
			d.Set("kafka", "sasl.mechanism", m, "from "+o+"sasl.mechanism")
		default:
			d.NotMapped(fmt.Sprintf("%ssasl.mechanism=%s: NOT SUPPORTED; Spillway speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", o, v))
		}
	}
	if key, v, ok := c.Get(o + "sasl.jaas.config"); ok {
		if m := jaasUser.FindStringSubmatch(v); m != nil {
			d.Set("kafka", "sasl.username", m[1], "from the username in "+key)
		}
		d.Credential("SPILLWAY_KAFKA_SASL_PASSWORD", "the password in "+key)
	}
	if _, _, ok := c.Get(o+"ssl.truststore.location", o+"ssl.truststore.password", o+"ssl.truststore.type"); ok {
		d.NotMapped(o + "ssl.truststore.*: Spillway reads PEM files, not Java key stores; export the CA certificate as PEM and set kafka.tls.ca_file")
	}
	if _, _, ok := c.Get(o+"ssl.keystore.location", o+"ssl.keystore.password", o+"ssl.key.password", o+"ssl.keystore.type"); ok {
		d.NotMapped(o + "ssl.keystore.*: Spillway reads PEM files, not Java key stores; export the client certificate and key as PEM and set kafka.tls.cert_file and kafka.tls.key_file")
	}
	return nil
}

var jaasUser = regexp.MustCompile(`username\s*=\s*"([^"]*)"`)

// importErrors maps Connect's error handling, which both products share.
// Connect uses its dead-letter queue only with errors.tolerance=all, and
// Spillway uses errors.dead_letter_topic whatever the tolerance, so the
// topic is imported with all only.
func importErrors(c *Connector, d *Doc) {
	tol := "none"
	if _, v, ok := c.Get("errors.tolerance"); ok {
		switch v {
		case "none", "all":
			tol = v
			d.Set("errors", "tolerance", v, "from errors.tolerance")
		default:
			d.Set("errors", "tolerance", "none", "errors.tolerance="+v+" is not none or all; Connect refuses it too")
		}
	}
	if key, v, ok := c.Get("errors.deadletterqueue.topic.name"); ok && v != "" {
		if tol == "all" {
			d.Set("errors", "dead_letter_topic", v, "from "+key)
		} else {
			d.NotMapped(c.Shown(key) + ": Connect uses it only with errors.tolerance=all, and so does this import (Spillway would send every record it can't write there)")
		}
	}
}

// explain says why a key has no line in the YAML and what to do: Connect's
// own keys here, the product's by its sink's Explain. It is called for
// every key no mapping used.
func (c *Connector) explain(key string, k Sink) string {
	shown := c.Shown(key)
	why := func(s string) string { return shown + ": " + s }
	switch {
	case key == "tasks.max":
		return why("Spillway has no tasks; to share the partitions, run more instances with the same kafka.group")
	case strings.HasPrefix(key, "key.converter.") || strings.HasPrefix(key, "value.converter."):
		return why("a converter's setting that changes nothing Spillway reads: it decodes by the schema id in each record (schema_registry), or stores the bytes")
	case key == "header.converter" || strings.HasPrefix(key, "header.converter."):
		return why("Spillway writes header values as their bytes: text as strings (base64 with value_encoding base64), as SimpleHeaderConverter gives UTF-8 text")
	case key == "transforms" || strings.HasPrefix(key, "transforms.") || key == "predicates" || strings.HasPrefix(key, "predicates."):
		return why("NOT SUPPORTED: Spillway has no Single Message Transforms and writes records as they are in Kafka; apply them upstream, or keep the connector for this data")
	case strings.HasPrefix(key, "errors."):
		return why("Connect's error reporting knob; Spillway logs every skipped record and sends it to errors.dead_letter_topic with its cause in headers when one is set")
	case strings.HasPrefix(key, "consumer.override.") || strings.HasPrefix(key, "consumer."):
		return why("Spillway sets its own consumer settings and bounds fetch memory itself (backpressure.memory_limit); nothing to do")
	case strings.HasPrefix(key, "config.action.reload") || key == "config.providers" || strings.HasPrefix(key, "config.providers."):
		return why("Connect's own setting; none in Spillway")
	case strings.Contains(c.props[key], "${"):
		return why("a Connect config provider reference; resolve it and set the value (or its environment variable) in Spillway")
	}
	return k.Explain(key, why)
}

// Query builds a URL query in the order given, leaving ':' and '/' as
// they are so that endpoints and ARNs stay readable.
type Query struct{ parts []string }

// Add appends k=v, v escaped.
func (q *Query) Add(k, v string) { q.parts = append(q.parts, k+"="+escapeQuery(v)) }

// String is the query with its "?", or "" when empty.
func (q *Query) String() string {
	if len(q.parts) == 0 {
		return ""
	}
	return "?" + strings.Join(q.parts, "&")
}

func escapeQuery(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		ch := v[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', strings.IndexByte("-._~:/", ch) >= 0:
			b.WriteByte(ch)
		default:
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}
