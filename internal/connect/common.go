package connect

import (
	"fmt"
	"regexp"
	"strings"
)

// importKafka maps what Connect's consumer needs: the group, the topics,
// and the consumer overrides a connector may carry.
func importKafka(c *connector, d *doc) error {
	const o = "consumer.override."
	if _, v, ok := c.get(o + "bootstrap.servers"); ok {
		d.set("kafka", "brokers", list(v), "from "+o+"bootstrap.servers")
	} else {
		d.set("kafka", "brokers", []string{"127.0.0.1:9092"}, "SET THIS: the Connect worker's bootstrap.servers (or SPILLWAY_KAFKA_BROKERS)")
	}
	if _, v, ok := c.get(o + "group.id"); ok {
		d.set("kafka", "group", v, "from "+o+"group.id: the connector's group, so Spillway continues from its commits")
	} else {
		d.set("kafka", "group", "connect-"+c.name, "Kafka Connect's group for connector \""+c.name+"\": Spillway continues from its commits")
	}
	if _, v, ok := c.get("topics"); ok {
		d.set("kafka", "topics", list(v), "from topics")
	}
	if _, v, ok := c.get("topics.regex"); ok {
		d.set("kafka", "topic_regex", v, "from topics.regex; Spillway's regexps are Go's (RE2): no lookaround or backreferences")
	}
	if d.lookup("kafka", "topics") == "" && d.lookup("kafka", "topic_regex") == "" {
		return errorf("%s: neither topics nor topics.regex is set; a sink connector needs one", c.file)
	}
	if _, v, ok := c.get(o + "auto.offset.reset"); ok {
		switch v {
		case "earliest", "latest":
			d.set("kafka", "start_offset", v, "from "+o+"auto.offset.reset")
		default:
			d.set("kafka", "start_offset", "earliest", fmt.Sprintf("%sauto.offset.reset=%s is NOT SUPPORTED: Spillway takes earliest or latest for a partition without a commit", o, v))
		}
	}
	if _, v, ok := c.get(o + "security.protocol"); ok {
		switch strings.ToUpper(v) {
		case "SSL", "SASL_SSL":
			d.set("kafka", "tls.enabled", true, "from "+o+"security.protocol="+v)
		case "PLAINTEXT", "SASL_PLAINTEXT":
		default:
			d.unmapped = append(d.unmapped, fmt.Sprintf("%ssecurity.protocol=%s: not a protocol Spillway knows; set kafka.tls and kafka.sasl by hand", o, v))
		}
	}
	if _, v, ok := c.get(o + "sasl.mechanism"); ok {
		switch m := strings.ToUpper(v); m {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
			d.set("kafka", "sasl.mechanism", m, "from "+o+"sasl.mechanism")
		default:
			d.unmapped = append(d.unmapped, fmt.Sprintf("%ssasl.mechanism=%s: NOT SUPPORTED; Spillway speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", o, v))
		}
	}
	if key, v, ok := c.get(o + "sasl.jaas.config"); ok {
		if m := jaasUser.FindStringSubmatch(v); m != nil {
			d.set("kafka", "sasl.username", m[1], "from the username in "+key)
		}
		d.credential("SPILLWAY_KAFKA_SASL_PASSWORD", "the password in "+key)
	}
	if _, _, ok := c.get(o+"ssl.truststore.location", o+"ssl.truststore.password", o+"ssl.truststore.type"); ok {
		d.unmapped = append(d.unmapped, o+"ssl.truststore.*: Spillway reads PEM files, not Java key stores; export the CA certificate as PEM and set kafka.tls.ca_file")
	}
	if _, _, ok := c.get(o+"ssl.keystore.location", o+"ssl.keystore.password", o+"ssl.key.password", o+"ssl.keystore.type"); ok {
		d.unmapped = append(d.unmapped, o+"ssl.keystore.*: Spillway reads PEM files, not Java key stores; export the client certificate and key as PEM and set kafka.tls.cert_file and kafka.tls.key_file")
	}
	return nil
}

var jaasUser = regexp.MustCompile(`username\s*=\s*"([^"]*)"`)

// importErrors maps Connect's error handling, which both products share.
// Connect uses its dead-letter queue only with errors.tolerance=all, and
// Spillway uses errors.dead_letter_topic whatever the tolerance, so the
// topic is imported with all only.
func importErrors(c *connector, d *doc) {
	tol := "none"
	if _, v, ok := c.get("errors.tolerance"); ok {
		switch v {
		case "none", "all":
			tol = v
			d.set("errors", "tolerance", v, "from errors.tolerance")
		default:
			d.set("errors", "tolerance", "none", "errors.tolerance="+v+" is not none or all; Connect refuses it too")
		}
	}
	if key, v, ok := c.get("errors.deadletterqueue.topic.name"); ok && v != "" {
		if tol == "all" {
			d.set("errors", "dead_letter_topic", v, "from "+key)
		} else {
			d.unmapped = append(d.unmapped, c.shown(key)+": Connect uses it only with errors.tolerance=all, and so does this import (Spillway would send every record it can't write there)")
		}
	}
}

// explain says why a key has no line in the YAML and what to do. It is
// called for every key no mapping used.
func (c *connector) explain(key string, k kind) string {
	shown := c.shown(key)
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
	if k.product == Aiven {
		return aivenExplain(key, why)
	}
	return confluentExplain(key, why)
}
