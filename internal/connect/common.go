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
func importErrors(c *connector, d *doc, k kind) {
	if _, v, ok := c.get("errors.tolerance"); ok {
		switch v {
		case "none", "all":
			d.set("errors", "tolerance", v, "from errors.tolerance")
		default:
			d.set("errors", "tolerance", "none", "errors.tolerance="+v+" is not none or all; Connect refuses it too")
		}
	}
	if _, v, ok := c.get("errors.deadletterqueue.topic.name"); ok && v != "" {
		d.set("errors", "dead_letter_topic", v, "from errors.deadletterqueue.topic.name")
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
	case strings.HasPrefix(key, "key.converter.") || strings.HasPrefix(key, "value.converter.") || strings.HasPrefix(key, "header.converter."):
		return why("a converter's setting; Spillway has no converters (see key.converter and value.converter)")
	case key == "key.converter" || key == "value.converter" || key == "header.converter":
		return why("Spillway has no converters: it writes the record's bytes as they are in Kafka. With ByteArrayConverter or StringConverter the content is the same; with JsonConverter and AvroConverter it is the serialized bytes, not the converted value (decoding by schema registry is not built)")
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
