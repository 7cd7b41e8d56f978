package connect_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/connect"
	"github.com/spillway/spillway/internal/connect/connecttest"
	"github.com/spillway/spillway/internal/connect/sinks"
)

// inputs are the example configs in each product's testdata, written from
// its documentation.
func inputs(t *testing.T) []string {
	t.Helper()
	return connecttest.Inputs(t, filepath.Join("*", "testdata"))
}

// TestEveryKeyAccountedFor: each key of each example is named in the YAML,
// on the line it maps to or in a comment saying why it isn't mapped, and
// no secret's value is.
func TestEveryKeyAccountedFor(t *testing.T) {
	for _, in := range inputs(t) {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		props, _, err := connect.Parse(in, data)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sinks.Import(in, data, "")
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.YAML)
		for k, v := range props {
			if k != "name" && k != "connector.class" && !strings.Contains(out, k) {
				t.Errorf("%s: key %s is neither mapped nor explained", in, k)
			}
			if connect.SecretKey(k) && len(v) > 3 && strings.Contains(out, v) {
				t.Errorf("%s: the value of secret %s is in the YAML", in, k)
			}
		}
		for _, secret := range []string{"s3cr3t-pw", "EXAMPLEKEY", "PRIVATE KEY", "bXlrZXk=", "YOUR_AWS_SECRET"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: %q is in the YAML", in, secret)
			}
		}
	}
}

// TestBadInput: what can't be imported is an *Error that says why.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, file, data, from, want string
	}{
		{"not JSON", "c.json", `{"name": "x", "config": {`, "", "is not valid JSON"},
		{"not a config", "notes.txt", "hello world\n", "", "neither JSON nor a .properties"},
		{"binary", "c.properties", "\xff\xfe\x00", "", "is not text"},
		{"empty", "c.json", "  \n", "", "is empty"},
		{"a list", "c.json", `{"config": {"topics": ["a", "b"]}}`, "", `"topics" is a JSON array`},
		{"no class", "c.properties", "name=x\ntopics=a\n", "", "has no connector.class"},
		{"unknown class", "c.json", `{"name":"x","connector.class":"io.confluent.connect.hdfs.HdfsSinkConnector"}`, "", `connector.class "io.confluent.connect.hdfs.HdfsSinkConnector" is not a connector Spillway imports`},
		{"wrong --from", "c.properties", "name=x\nconnector.class=io.confluent.connect.s3.S3SinkConnector\n", connect.Aiven, "is Confluent's S3 sink, not --from aiven"},
		{"no name", "c.properties", "connector.class=io.aiven.kafka.connect.gcs.GcsSinkConnector\ngcs.bucket.name=b\ntopics=t\n", "", "the connector has no name"},
		{"template without partition", "c.properties", "name=x\nconnector.class=io.aiven.kafka.connect.gcs.GcsSinkConnector\ngcs.bucket.name=b\ntopics=t\nfile.name.template={{topic}}-{{start_offset}}\n", "",
			"the file name template can't be expressed in Spillway: file name template \"{{topic}}-{{start_offset}}\": template has no {{partition}}"},
		{"minutes", "c.properties", confluentTime("'year'=YYYY/'minute'=mm", "60000"), "",
			`path.format "'year'=YYYY/'minute'=mm" can't be expressed in a Spillway template: "mm" at offset 21 has no template variable`},
		{"duration", "c.properties", confluentTime("'dt'=YYYY-MM-dd/'hour'=HH", "900000"), "",
			"partition.duration.ms \"900000\" with path.format \"'dt'=YYYY-MM-dd/'hour'=HH\" can't be expressed: Spillway's time buckets are the finest unit of the path (hour, partition.duration.ms=3600000)"},
		{"utc_date", "c.properties", "name=x\nconnector.class=io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector\naws.s3.bucket.name=b\ntopics=t\naws.s3.prefix=logs/{{utc_date}}/\n", "", "uses {{utc_date}} or {{local_date}}"},
		{"envelope", "c.properties", "name=x\nconnector.class=io.aiven.kafka.connect.gcs.GcsSinkConnector\ngcs.bucket.name=b\ntopics=t\nformat.output.type=jsonl\nformat.output.fields=key,value\nformat.output.envelope=false\n", "",
			"these settings make a Spillway config that isn't valid, so nothing is printed:\nformat.fields: must list exactly one field when format.envelope is false"},
		{"no topics", "c.properties", "name=x\nconnector.class=io.aiven.kafka.connect.gcs.GcsSinkConnector\ngcs.bucket.name=b\n", "", "neither topics nor topics.regex is set"},
		{"no bucket", "c.properties", "name=x\nconnector.class=io.confluent.connect.s3.S3SinkConnector\ntopics=t\nformat.class=io.confluent.connect.s3.format.json.JsonFormat\n", "", "s3.bucket.name is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sinks.Import(tc.file, []byte(tc.data), tc.from)
			var e *connect.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want an *Error", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func confluentTime(format, duration string) string {
	return "name=x\nconnector.class=io.confluent.connect.s3.S3SinkConnector\ns3.bucket.name=b\ntopics=t\nflush.size=10\n" +
		"format.class=io.confluent.connect.s3.format.json.JsonFormat\n" +
		"partitioner.class=io.confluent.connect.storage.partitioner.TimeBasedPartitioner\n" +
		"path.format=" + format + "\npartition.duration.ms=" + duration + "\nlocale=en-US\ntimezone=UTC\n"
}

// TestProperties covers the .properties syntax Connect's files use.
func TestProperties(t *testing.T) {
	got, err := connect.ParseProperties("c.properties", "# comment\n! also\n  a = 1\nb:2\nc=multi \\\n   line\nd=\\u00e9\\t\\\\\ne\\:f=g\n\nh=\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": "2", "c": "multi line", "d": "é\t\\", "e:f": "g", "h": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %q", got)
	}
}

// TestWrapperAndFlat: the REST API's {"name", "config"} and the config
// object alone give the same YAML.
func TestWrapperAndFlat(t *testing.T) {
	flat := `{"name":"s","connector.class":"io.confluent.connect.s3.S3SinkConnector","s3.bucket.name":"b","topics":"t","flush.size":100,"format.class":"io.confluent.connect.s3.format.json.JsonFormat"}`
	wrapped := `{"name":"s","config":{"connector.class":"io.confluent.connect.s3.S3SinkConnector","s3.bucket.name":"b","topics":"t","flush.size":"100","format.class":"io.confluent.connect.s3.format.json.JsonFormat"}}`
	a, err := sinks.Import("a.json", []byte(flat), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sinks.Import("a.json", []byte(wrapped), connect.Confluent)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.YAML) != string(b.YAML) {
		t.Errorf("flat:\n%s\nwrapped:\n%s", a.YAML, b.YAML)
	}
	if !strings.Contains(string(a.YAML), "group: connect-s ") {
		t.Errorf("no connect-s group:\n%s", a.YAML)
	}
}

// TestWarningsNameTheirKey: every warning of every example names a key of
// the connector's config (or a converter it leaves unset), so the user
// knows which line of the connector it is about.
func TestWarningsNameTheirKey(t *testing.T) {
	for _, in := range inputs(t) {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		props, _, err := connect.Parse(in, data)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sinks.Import(in, data, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range res.Warnings {
			named := false
			for k := range props {
				named = named || strings.Contains(w, k)
			}
			for _, absent := range []string{"value.converter (not set)", "key.converter (not set)", "rotate.interval.ms", "file.compression.type (not set)", "file.name.template"} {
				named = named || strings.Contains(w, absent)
			}
			if !named {
				t.Errorf("%s: warning %q names no key of the connector's config", in, w)
			}
		}
	}
}

// TestDeadLetterTopicNeedsToleranceAll: Connect uses its dead-letter queue
// only with errors.tolerance=all, and Spillway uses errors.dead_letter_topic
// whatever the tolerance: importing it alone would send every record
// Spillway can't write there instead of stopping.
func TestDeadLetterTopicNeedsToleranceAll(t *testing.T) {
	in := "name=x\nconnector.class=io.aiven.kafka.connect.gcs.GcsSinkConnector\ngcs.bucket.name=b\ntopics=t\n" +
		"key.converter=org.apache.kafka.connect.storage.StringConverter\nvalue.converter=org.apache.kafka.connect.converters.ByteArrayConverter\n" +
		"errors.deadletterqueue.topic.name=dlq\n"
	res, err := sinks.Import("c.properties", []byte(in), "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.YAML), "dead_letter_topic:") {
		t.Errorf("dead_letter_topic imported without errors.tolerance=all:\n%s", res.YAML)
	}
	if !strings.Contains(string(res.YAML), "errors.deadletterqueue.topic.name=dlq: Connect uses it only with errors.tolerance=all") {
		t.Errorf("the YAML doesn't say why the topic is left out:\n%s", res.YAML)
	}
}

// TestRegistryConverterBadInput: what the registry mapping can't express
// is an *Error naming the keys.
func TestRegistryConverterBadInput(t *testing.T) {
	base := "name=x\nconnector.class=io.aiven.kafka.connect.gcs.GcsSinkConnector\ngcs.bucket.name=b\ntopics=t\nformat.output.type=jsonl\nformat.output.fields=key,value\n" +
		"key.converter=io.confluent.connect.avro.AvroConverter\nvalue.converter=io.confluent.connect.avro.AvroConverter\n"
	for _, tc := range []struct{ name, extra, want string }{
		{"two registries", "key.converter.schema.registry.url=http://a:8081\nvalue.converter.schema.registry.url=http://b:8081\n", "use two schema registries (http://b:8081, http://a:8081)"},
		{"not http", "key.converter.schema.registry.url=http://a:8081\nvalue.converter.schema.registry.url=mock://a\n", `value.converter.schema.registry.url="mock://a" is not an http:// or https:// URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sinks.Import("c.properties", []byte(base+tc.extra), "")
			var e *connect.Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want an *Error with %q", err, tc.want)
			}
		})
	}
	// Credentials in the URL (basic.auth.credentials.source URL, the
	// default) become the username and a password to set.
	res, err := sinks.Import("c.properties", []byte(base+"key.converter.schema.registry.url=http://u1:s3cr3t-pw@reg:8081\nvalue.converter.schema.registry.url=http://u1:s3cr3t-pw@reg:8081,http://reg2:8081\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"url: 'http://reg:8081'", "username: u1\n", "SPILLWAY_SCHEMA_REGISTRY_PASSWORD", "its first URL: Spillway takes one;", "http://reg2:8081", "decode: both"} {
		if !strings.Contains(string(res.YAML), want) {
			t.Errorf("no %q in:\n%s", want, res.YAML)
		}
	}
	if strings.Contains(string(res.YAML), "s3cr3t-pw") {
		t.Errorf("the password is in the YAML:\n%s", res.YAML)
	}
}
