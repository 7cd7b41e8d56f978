package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/registry"
)

// The effective default config as `spillway config check` prints it.
const defaultYAML = `kafka:
  brokers: ['127.0.0.1:9092']
  group: spillway
  topics: [events]
  topic_regex: ""
  start_offset: earliest
  client_id: spillway
  instance_id: ""
  session_timeout: 45s
  startup_timeout: 1m0s
  tls:
    enabled: false
    ca_file: ""
    cert_file: ""
    key_file: ""
  sasl:
    mechanism: ""
    username: ""
    password: ""
storage:
  url: file:///tmp/spillway-out
  prefix: ""
  part_size: 8MiB
  upload_concurrency: 4
  max_retries: 9
  topic_id_change: fail
  earlier_files: none
  conditional_writes: required
file:
  name_template: '{{topic}}-{{partition}}-{{start_offset}}'
  timestamp_source: wallclock
  timezone: UTC
  extension: auto
  max_records: 0
  max_bytes: 128MiB
  max_age: 5m0s
format:
  type: jsonl
  compression: none
  fields: [key, value, offset, timestamp, headers]
  value_encoding: none
  envelope: true
  bytes_separator: \n
schema_registry:
  url: ""
  username: ""
  password: ""
  decode: value
  tls:
    ca_file: ""
    cert_file: ""
    key_file: ""
backpressure:
  memory_limit: auto
  max_buffered_records: 0
  max_open_files: 0
  spool_dir: ""
  disk_limit: auto
errors:
  tolerance: none
  dead_letter_topic: ""
  null_values: write
iceberg:
  table: ""
  catalog:
    type: sql
    uri: ""
    warehouse: ""
    credential: ""
    token: ""
    tls:
      ca_file: ""
      cert_file: ""
      key_file: ""
    region: ""
    catalog_id: ""
    properties: []
  partition_by: []
  commit_interval: 1m0s
  auto_create: true
  evolve_schema: true
  expire_snapshots:
    enabled: true
    max_age: 120h0m0s
    keep_last: 1
admin:
  listen: 127.0.0.1:8080
  token: ""
  token_file: ""
  tls:
    cert_file: ""
    key_file: ""
  stall_timeout: 0s
log:
  level: info
  format: text
shutdown:
  timeout: 30s
`

func TestYAMLDefaultsRoundTrip(t *testing.T) {
	c, err := LoadBytes(nil, baseEnv)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != defaultYAML {
		t.Errorf("YAML():\n%s\nwant:\n%s", out, defaultYAML)
	}
	back, err := LoadBytes(out, nil)
	if err != nil {
		t.Fatalf("reloading YAML() output: %v", err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, c)
	}
}

// TestYAMLRoundTripEveryKey changes every key from its default, so that a
// key YAML() forgets or renders wrongly can't hide behind its default.
func TestYAMLRoundTripEveryKey(t *testing.T) {
	dir := t.TempDir()
	var files [3]string
	for i, name := range []string{"ca.pem", "cert.pem", "key.pem"} {
		files[i] = filepath.Join(dir, name)
		if err := os.WriteFile(files[i], []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &Config{
		Kafka: Kafka{
			Brokers: []string{"a:1", "b:2"}, Group: "g", TopicRegex: `events\..*`, StartOffset: "latest", ClientID: "123", InstanceID: "spillway-0", SessionTimeout: 20 * time.Second, StartupTimeout: 90 * time.Second,
			TLS:  TLS{Enabled: true, CAFile: files[0], CertFile: files[1], KeyFile: files[2]},
			SASL: SASL{Mechanism: "PLAIN", Username: "u", Password: "hunter2"},
		},
		Storage: Storage{URL: "s3://bucket?region=eu-west-1&use_path_style=true", Prefix: "raw/", PartSize: 5_000_000 + 1<<20, UploadConcurrency: 2, TopicIDChange: "start_fresh", EarlierFiles: "foreign", ConditionalWrites: "unsafe_ignore"},
		File: File{NameTemplate: "{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}.json", TimestampSource: "event", Timezone: "Europe/Berlin",
			MaxRecords: 1000, MaxBytes: 1_000_000_000, MaxAge: 90 * time.Second},
		Format: Format{Type: "bytes", Compression: "zstd", Fields: []string{"value"}, ValueEncoding: "base64", Envelope: false, BytesSeparator: `\r\n`},
		SchemaRegistry: registry.Options{URL: "https://registry:8081", Username: "key", Password: "s3cret", Decode: "both",
			TLS: registry.TLS{CAFile: files[0], CertFile: files[1], KeyFile: files[2]}},
		Backpressure: Backpressure{
			MemoryLimit: "1500MB", MaxBufferedRecords: 10_000, MaxOpenFiles: 7,
			SpoolDir: filepath.Join(dir, "spool"), DiskLimit: "20GiB",
		},
		Errors: Errors{Tolerance: "all", DeadLetterTopic: "dlq", NullValues: "ignore"},
		Admin: admin.Options{Listen: ":0", TokenFile: files[0], TLS: admin.TLS{CertFile: files[1], KeyFile: files[2]},
			StallTimeout: 10 * time.Minute},
		Log:      Log{Level: "debug", Format: "json"},
		Shutdown: Shutdown{Timeout: 1500 * time.Millisecond},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("test config is invalid: %v", err)
	}
	// Every leaf differs from its default, but kafka.topics: it excludes
	// topic_regex, and TestYAMLDefaultsRoundTrip covers it; and admin.token,
	// which excludes admin.token_file: TestRedacted covers it; and the
	// iceberg section, which needs format.type parquet:
	// TestIcebergYAMLRoundTrip covers it.
	def, got := flatten(Default()), flatten(c)
	for _, s := range keys.leaves {
		if s.key != "kafka.topics" && s.key != "admin.token" && !strings.HasPrefix(s.key, "iceberg.") && reflect.DeepEqual(def[s.key], got[s.key]) {
			t.Errorf("%s keeps its default; change it so the round trip tests it", s.key)
		}
	}

	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadBytes(out, nil)
	if err != nil {
		t.Fatalf("reloading:\n%s\n%v", out, err)
	}
	want := *c
	want.Kafka.SASL.Password = "REDACTED" // YAML() never prints the secret
	want.SchemaRegistry.Password = "REDACTED"
	if !reflect.DeepEqual(back, &want) {
		t.Errorf("round trip:\n got %+v\nwant %+v\nYAML:\n%s", back, &want, out)
	}
}

func TestRedacted(t *testing.T) {
	const secret = "hunter2-S3cret"
	c := Default()
	c.Kafka.Topics = []string{"events"}
	c.Kafka.SASL = SASL{Mechanism: "PLAIN", Username: "me", Password: secret}
	c.SchemaRegistry = registry.Options{URL: "https://registry:8081", Username: "key", Password: secret, Decode: "value"}
	c.Storage.URL = "s3://bucket?region=us-east-1&access_key=AKIA" + secret + "&secret=" + secret + "&endpoint=http://minio:9000"
	c.Admin.Token = secret

	r := c.Redacted()
	if r.Admin.Token != "REDACTED" {
		t.Errorf("admin.token: %q", r.Admin.Token)
	}
	if r.Kafka.SASL.Password != "REDACTED" || r.Kafka.SASL.Username != "me" {
		t.Errorf("sasl: %+v", r.Kafka.SASL)
	}
	if r.SchemaRegistry.Password != "REDACTED" || r.SchemaRegistry.Username != "key" {
		t.Errorf("schema_registry: %+v", r.SchemaRegistry)
	}
	if want := "s3://bucket?region=us-east-1&access_key=REDACTED&secret=REDACTED&endpoint=http://minio:9000"; r.Storage.URL != want {
		t.Errorf("url: %s\nwant %s", r.Storage.URL, want)
	}
	// The copy is deep and the original untouched.
	r.Kafka.Topics[0] = "changed"
	if c.Kafka.Topics[0] != "events" || c.Kafka.SASL.Password != secret {
		t.Error("Redacted changed the original")
	}

	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), secret) {
		t.Errorf("YAML() shows the secret:\n%s", out)
	}
	if !strings.Contains(string(out), "password: REDACTED") {
		t.Errorf("YAML() should show that a password is set:\n%s", out)
	}
}

// TestErrorsHideSecrets feeds secrets through every path that reports a
// value and checks that none comes out.
func TestErrorsHideSecrets(t *testing.T) {
	const secret = "hunter2-S3cret"
	cases := []struct {
		name, yaml string
		env        []string
	}{
		{"registry password env with a bad URL", "", append([]string{"SPILLWAY_SCHEMA_REGISTRY_URL=ftp://x", "SPILLWAY_SCHEMA_REGISTRY_PASSWORD=" + secret}, baseEnv...)},
		{"registry credentials in the URL", "schema_registry: {url: 'http://u:" + secret + "@h:1'}\n", baseEnv},
		{"password with a bad mechanism", "kafka:\n  sasl: {mechanism: nope, username: u, password: " + secret + "}\n", baseEnv},
		{"password of the wrong type", "kafka:\n  sasl: {password: [" + secret + "]}\n", baseEnv},
		{"password under a misspelt key", "kafka:\n  sasl: {pasword: " + secret + "}\n", baseEnv},
		{"password in a misspelt variable", "", append([]string{"SPILLWAY_KAFKA_SASL_PASWORD=" + secret}, baseEnv...)},
		{"credentials in a bad URL", "storage:\n  url: 'ftp://u:" + secret + "@host/?sig=" + secret + "'\n", topicsEnv},
		{"credentials in a URL that does not parse", "storage:\n  url: 's3://u:" + secret + "@bucket:port?x'\n", topicsEnv},
		{"credentials with a bad part size", "storage:\n  url: 's3://b?secret_access_key=" + secret + "'\n  part_size: 1MiB\n", topicsEnv},
		{"a document that is only a secret", secret + "\n", nil},
		{"admin token with a token file", "admin: {token: " + secret + ", token_file: /nonexistent}\n", baseEnv},
		{"admin token in the environment, endpoint off", "admin: {listen: ''}\n", append([]string{"SPILLWAY_ADMIN_TOKEN=" + secret}, baseEnv...)},
		{"admin token with white space", "admin: {token: ' " + secret + "'}\n", baseEnv},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tt.yaml), tt.env)
			if err == nil {
				t.Fatal("want an error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
}
