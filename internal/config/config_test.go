package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/admin"
	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// baseEnv supplies the two keys that have no default, so that a case can
// focus on the one thing it breaks.
var baseEnv = []string{"SPILLWAY_STORAGE_URL=file:///tmp/spillway-out", "SPILLWAY_KAFKA_TOPICS=events"}

// topicsEnv is baseEnv for cases about storage.url: the environment
// overrides the file, so it must not set the URL.
var topicsEnv = []string{"SPILLWAY_KAFKA_TOPICS=events"}

// loadErr loads yaml with env and returns the *Error it must fail with.
func loadErr(t *testing.T, yaml string, env []string) *Error {
	t.Helper()
	c, err := LoadBytes([]byte(yaml), env)
	if err == nil {
		t.Fatalf("LoadBytes succeeded, want an error; got %+v", c)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error is %T, want *Error: %v", err, err)
	}
	return e
}

// TestRejects proves promise 4: every class of bad input is refused with a
// message that names the key, shows the value and says what to do. Each
// case lists the complete error output, so it also proves that a rejected
// value causes no follow-on noise.
func TestRejects(t *testing.T) {
	dir := t.TempDir()
	pem := filepath.Join(dir, "client.pem")
	if err := os.WriteFile(pem, []byte("not really PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name  string
		yaml  string
		env   []string // baseEnv when nil
		lines []string
	}{
		// Unknown keys, at any depth.
		{"typo in a key", "kafka:\n  topcs: [a]\n", nil,
			[]string{"kafka.topcs: unknown key; did you mean kafka.topics?"}},
		{"typo three levels deep", "kafka:\n  sasl:\n    pasword: hunter2\n", nil,
			[]string{"kafka.sasl.pasword: unknown key; did you mean kafka.sasl.password?"}},
		{"typo in a section", "kafak:\n  group: g\n", nil,
			[]string{"kafak: unknown key; did you mean kafka?"}},
		{"key in the wrong section", "storage:\n  name_template: x\n", nil,
			[]string{"storage.name_template: unknown key; did you mean file.name_template?"}},
		{"unknown top-level key, nothing close", "bogus: 1\n", nil,
			[]string{"bogus: unknown key; the top level takes kafka, storage, file, format, schema_registry, backpressure, errors, iceberg, admin, log, shutdown"}},
		{"unknown key in a section, nothing close", "log:\n  colour: true\n", nil,
			[]string{"log.colour: unknown key; log takes level, format"}},

		// Keys given twice: named with their section and both lines.
		{"duplicate top-level key", "kafka:\n  topics: [a]\nstorage:\n  url: file:///x\nkafka:\n  group: g\n", nil,
			[]string{"yaml:5: kafka is set twice (first at line 1); keep one of the two"}},
		{"duplicate nested keys, all of them", "kafka:\n  topics: [a]\n  sasl:\n    username: u\n    username: v\n  topics: [b]\n", nil, []string{
			"yaml:5: kafka.sasl.username is set twice (first at line 4); keep one of the two",
			"yaml:6: kafka.topics is set twice (first at line 2); keep one of the two",
		}},
		{"a list, not a mapping", "- kafka\n- storage\n", nil,
			[]string{"yaml: the config must be a mapping of keys such as kafka: and storage:"}},

		// Wrong types.
		{"string where a list is expected", "kafka:\n  brokers: a:9092\n", nil,
			[]string{`kafka.brokers: "a:9092" is a string; expected a list such as ["127.0.0.1:9092"]`}},
		{"list where a string is expected", "kafka:\n  group: [a, b]\n", nil,
			[]string{"kafka.group: expected a string, not a list"}},
		{"scalar where a section is expected", "log: debug\n", nil,
			[]string{"log: expected a section with keys level, format, not a string"}},
		{"mapping inside a list", "format:\n  fields: [key, {a: b}]\n", nil,
			[]string{"format.fields: item 2 is a section (a mapping of keys); expected a list of strings such as [key, value, offset, timestamp, headers]"}},
		{"not a boolean", "format:\n  envelope: maybe\n", nil,
			[]string{`format.envelope: "maybe" is not valid; use true or false`}},
		{"not a number", "storage:\n  upload_concurrency: lots\n", nil,
			[]string{`storage.upload_concurrency: "lots" is not a whole number`}},
		{"not a size", "file:\n  max_bytes: 12XB\n", nil,
			[]string{`file.max_bytes: "12XB" is not a size; use a number with a unit such as 64MiB, 1GB, 512KiB (units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)`}},
		{"negative size", "storage:\n  part_size: -1\n", nil,
			[]string{`storage.part_size: "-1" is not a size; sizes can't be negative`}},
		{"duration without unit", "file:\n  max_age: 300\n", nil,
			[]string{`file.max_age: "300" is not a duration; use Go syntax such as 5m, 30s or 1h30m`}},
		{"empty duration", "shutdown:\n  timeout:\n", nil,
			[]string{"shutdown.timeout: expected a duration such as 5m or 30s, not empty"}},

		// kafka
		{"no brokers", "kafka:\n  brokers: []\n", nil,
			[]string{`kafka.brokers: required; list at least one broker as host:port, such as ["127.0.0.1:9092"]`}},
		{"brokers not host:port", "kafka:\n  brokers: [localhost, ':9092', 'h:99999']\n", nil, []string{
			`kafka.brokers: "localhost" is not host:port; use host:port such as 127.0.0.1:9092`,
			`kafka.brokers: ":9092" has no host; use host:port such as 127.0.0.1:9092`,
			`kafka.brokers: "h:99999" has an invalid port "99999"; use host:port such as 127.0.0.1:9092`,
		}},
		{"empty group", "kafka:\n  group: ''\n", nil,
			[]string{"kafka.group: required; set the consumer group name, such as spillway"}},
		{"bad instance id and session timeout", "kafka:\n  instance_id: 'pod 0'\n  session_timeout: 1s\n", nil, []string{
			`kafka.instance_id: "pod 0" is not a valid group instance id; use 1 to 249 letters, digits, '.', '_' or '-', unique per instance, such as the pod name`,
			`kafka.session_timeout: "1s" is outside what brokers accept by default; use a duration from 6s to 30m0s, such as 45s`,
		}},
		{"startup timeout too short", "kafka:\n  startup_timeout: 500ms\n", nil, []string{
			`kafka.startup_timeout: "500ms" is out of range; use a duration from 1s to 1h0m0s, such as 60s`,
		}},
		{"startup timeout too long", "kafka:\n  startup_timeout: 2h\n", nil, []string{
			`kafka.startup_timeout: "2h0m0s" is out of range; use a duration from 1s to 1h0m0s, such as 60s`,
		}},
		{"neither topics nor topic_regex", "", []string{"SPILLWAY_STORAGE_URL=mem://"},
			[]string{`kafka.topics: required; list the topics to consume, such as ["events"], or set kafka.topic_regex to a pattern such as "events\\..*"`}},
		{"both topics and topic_regex", "kafka:\n  topic_regex: 'a.*'\n", nil,
			[]string{`kafka.topic_regex: "a.*" is set as well as kafka.topics; set only one of the two`}},
		{"topic_regex does not compile", "kafka:\n  topic_regex: '('\n", []string{"SPILLWAY_STORAGE_URL=mem://"},
			[]string{`kafka.topic_regex: "(" is not a valid regular expression: missing closing )`}},
		{"bad and duplicate topic names", "kafka:\n  topics: ['a b', x, x]\n", []string{"SPILLWAY_STORAGE_URL=mem://"}, []string{
			`kafka.topics: "a b" is not a valid topic name; use 1 to 249 letters, digits, '.', '_' or '-'`,
			`kafka.topics: "x" is listed twice`,
		}},
		{"start_offset typo", "kafka:\n  start_offset: earlyest\n", nil,
			[]string{`kafka.start_offset: "earlyest" is not valid; use earliest or latest`}},
		{"unknown SASL mechanism", "kafka:\n  sasl: {mechanism: gssapi, username: u, password: hunter2}\n", nil,
			[]string{`kafka.sasl.mechanism: "gssapi" is not valid; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, or leave it empty for no authentication`}},
		{"SASL without credentials", "kafka:\n  sasl: {mechanism: scram-sha-256}\n", nil, []string{
			"kafka.sasl.username: required when kafka.sasl.mechanism is set",
			"kafka.sasl.password: required when kafka.sasl.mechanism is set",
		}},
		{"SASL credentials without mechanism", "kafka:\n  sasl: {username: u, password: hunter2}\n", nil,
			[]string{"kafka.sasl.mechanism: required when kafka.sasl.username or password is set; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"}},
		{"TLS certificate without key", "kafka:\n  tls: {enabled: true, cert_file: '" + pem + "'}\n", nil,
			[]string{"kafka.tls.key_file: required when kafka.tls.cert_file is set: a client certificate needs its private key"}},
		{"TLS key without certificate", "kafka:\n  tls: {enabled: true, key_file: '" + pem + "'}\n", nil,
			[]string{"kafka.tls.cert_file: required when kafka.tls.key_file is set: a private key needs its client certificate"}},
		{"TLS files that don't exist or are directories", "kafka:\n  tls: {enabled: true, ca_file: '" + missing + "', cert_file: '" + dir + "', key_file: '" + pem + "'}\n", nil, []string{
			`kafka.tls.ca_file: "` + missing + `" does not exist; give the path of a PEM file`,
			`kafka.tls.cert_file: "` + dir + `" is a directory; give the path of a PEM file`,
		}},
		{"TLS files while TLS is off", "kafka:\n  tls: {ca_file: '" + pem + "'}\n", nil,
			[]string{`kafka.tls.ca_file: "` + pem + `" is set but kafka.tls.enabled is false; set kafka.tls.enabled: true to use TLS`}},

		// schema_registry
		{"registry URL without scheme", "schema_registry: {url: 'registry:8081'}\n", nil,
			[]string{`schema_registry.url: "registry:8081" must start with http:// or https://, such as http://127.0.0.1:8081`}},
		{"registry URL with credentials", "schema_registry: {url: 'http://me:hunter2@registry:8081'}\n", nil,
			[]string{`schema_registry.url: must not carry credentials; set schema_registry.username and schema_registry.password (or their SPILLWAY_SCHEMA_REGISTRY_* variables) instead`}},
		{"registry user without password", "schema_registry: {url: 'http://registry:8081', username: me}\n", nil,
			[]string{`schema_registry.password: required when schema_registry.username is set: basic auth takes both (set SPILLWAY_SCHEMA_REGISTRY_PASSWORD to keep it out of the file)`}},
		{"registry password without URL", "schema_registry: {password: hunter2}\n", nil,
			[]string{`schema_registry.password: is set but schema_registry.url is empty; set the registry's URL, such as http://127.0.0.1:8081`}},
		{"registry decode typo", "schema_registry: {url: 'http://registry:8081', decode: values}\n", nil,
			[]string{`schema_registry.decode: "values" is not valid; use value, key or both`}},
		{"registry TLS over http", "schema_registry: {url: 'http://registry:8081', tls: {ca_file: '" + pem + "'}}\n", nil,
			[]string{`schema_registry.tls.ca_file: "` + pem + `" is set but schema_registry.url is not https://; use an https URL to use TLS`}},
		{"registry TLS files", "schema_registry: {url: 'https://registry:8081', tls: {ca_file: '" + missing + "', key_file: '" + pem + "'}}\n", nil, []string{
			"schema_registry.tls.cert_file: required when schema_registry.tls.key_file is set: a private key needs its client certificate",
			`schema_registry.tls.ca_file: "` + missing + `" does not exist; give the path of a PEM file`,
		}},

		// storage
		{"no storage URL", "", topicsEnv,
			[]string{"storage.url: required; set it to a gocloud URL such as file:///var/lib/spillway/out or s3://bucket?region=us-east-1"}},
		{"unsupported scheme, credentials hidden", "storage:\n  url: 'http://user:hunter2@example.com/x'\n", topicsEnv,
			[]string{`storage.url: "http://REDACTED@example.com/x" has scheme http, which is not supported; use file, mem, s3, gs or azblob`}},
		{"path without scheme", "storage:\n  url: /var/out\n", topicsEnv,
			[]string{`storage.url: "/var/out" has no scheme; for a local directory use file:///var/out`}},
		{"file URL with a host and no path", "storage:\n  url: file://out\n", topicsEnv,
			[]string{`storage.url: "file://out" names the host "out", which a file URL can't have; for the directory out under the working directory write file:out, for /out write file:///out`}},
		{"file URL with a host that hides a relative path", "storage:\n  url: file://relative/dir\n", topicsEnv,
			[]string{`storage.url: "file://relative/dir" names the host "relative", which a file URL can't have (files would go to /dir); for the directory relative/dir under the working directory write file:relative/dir, for /relative/dir write file:///relative/dir`}},
		{"file URL with a dot host", "storage:\n  url: file://./out/\n", topicsEnv,
			[]string{`storage.url: "file://./out/" names the host ".", which a file URL can't have (files would go to /out/); for the directory ./out under the working directory write file:./out, for an absolute one write file:///var/lib/spillway/out`}},
		{"file URL with a port", "storage:\n  url: 'file://h:1/x'\n", topicsEnv,
			[]string{`storage.url: "file://h:1/x" names the host "h:1", which a file URL can't have; write an absolute directory as file:///var/lib/spillway/out (three slashes), or one relative to the working directory as file:out`}},
		{"file URL with a user", "storage:\n  url: 'file://me@/x'\n", topicsEnv,
			[]string{`storage.url: "file://REDACTED@/x" has a user name or password, which a file URL can't have; write an absolute directory as file:///var/lib/spillway/out (three slashes), or one relative to the working directory as file:out`}},
		{"file URL with no path at all", "storage:\n  url: 'file:'\n", topicsEnv,
			[]string{`storage.url: "file:" has no path; write an absolute directory as file:///var/lib/spillway/out (three slashes), or one relative to the working directory as file:out`}},
		{"file URL with a fragment", "storage:\n  url: 'file:///tmp/run#01/out'\n", topicsEnv,
			[]string{`storage.url: "file:///tmp/run#REDACTED" has a query or fragment (? or #), which a file URL doesn't use: files would go to /tmp/run; if the directory's name holds ? or #, write them as %3F and %23`}},
		{"file URL with a tilde", "storage:\n  url: 'file:~/out'\n", topicsEnv,
			[]string{`storage.url: "file:~/out" starts with ~, which is not expanded to a home directory; write the absolute path, such as file:///home/me/out`}},
		{"storage prefix that escapes", "storage:\n  prefix: ../escape/\n", nil,
			[]string{`storage.prefix: "../escape/" has a ".." segment; names must stay under storage.url, so "." and ".." segments are not allowed; use a prefix such as raw/`}},
		{"absolute storage prefix", "storage:\n  prefix: /abs/\n", nil,
			[]string{`storage.prefix: "/abs/" starts with "/"; names are relative to storage.url, so drop the leading "/", as in "abs/"`}},
		{"storage prefix with an empty segment", "storage:\n  prefix: a//b/\n", nil,
			[]string{`storage.prefix: "a//b/" has an empty path segment ("//"); write single slashes, as in "a/b/"`}},
		{"bucket missing", "storage:\n  url: 's3:///x?region=eu-west-1'\n", topicsEnv,
			[]string{`storage.url: "s3:///x?region=eu-west-1" has no bucket or container name; use a form such as s3://NAME`}},
		{"part size too small", "storage:\n  part_size: 32KiB\n", nil,
			[]string{`storage.part_size: "32KiB" is too small; use at least 64KiB`}},
		{"S3 storage class that can't be read back", "storage:\n  url: 's3://b?region=us-east-1&storage_class=GLACIER'\n", topicsEnv,
			[]string{`storage.url: "s3://b?region=us-east-1&storage_class=GLACIER" storage_class=GLACIER: objects in that class can't be read back without a restore, and resuming after a crash reads a partition's last file; write STANDARD or STANDARD_IA and move files later with a lifecycle rule`}},
		{"unknown S3 storage class", "storage:\n  url: 's3://b?region=us-east-1&storage_class=cheap'\n", topicsEnv,
			[]string{`storage.url: "s3://b?region=us-east-1&storage_class=cheap" storage_class="cheap" is not an S3 storage class; use STANDARD, STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING or GLACIER_IR`}},
		{"part size too small for S3", "storage:\n  url: 's3://b?region=us-east-1'\n  part_size: 1MiB\n", topicsEnv,
			[]string{`storage.part_size: "1MiB" is too small for s3: S3 parts must be at least 5MiB; use 5MiB or more, such as 8MiB`}},
		{"part size too small for max_bytes on S3", "storage:\n  url: 's3://b?region=us-east-1'\n  part_size: 5MiB\nfile:\n  max_bytes: 100GiB\n", topicsEnv,
			[]string{`storage.part_size: "5MiB" is too small for file.max_bytes 100GiB: S3 allows 10000 parts per object (one is kept spare for the record that carries a file past max_bytes); use at least 11MiB, or set file.max_bytes to at most 49995MiB`}},
		{"part size too small for max_bytes on Azure", "storage:\n  url: azblob://c\n  part_size: 64KiB\nfile:\n  max_bytes: 4GiB\n", topicsEnv,
			[]string{`storage.part_size: "64KiB" is too small for file.max_bytes 4GiB: Azure Blob allows 50000 parts per object (one is kept spare for the record that carries a file past max_bytes); use at least 1MiB, or set file.max_bytes to at most 3124MiB`}},
		{"part size too large for S3", "storage:\n  url: 's3://b?region=us-east-1'\n  part_size: 6GiB\n", topicsEnv,
			[]string{`storage.part_size: "6GiB" is too large for s3: a part can be at most 5GiB; use a size such as 8MiB`}},
		{"part size not a GCS chunk", "storage:\n  url: gs://b\n  part_size: 5000000B\n", topicsEnv,
			[]string{`storage.part_size: "5MB" is not a multiple of 256KiB: GCS uploads in chunks of multiples of 256KiB and would round it up, holding more memory than counted; use 4864KiB or 5MiB`}},
		{"no upload concurrency", "storage:\n  upload_concurrency: 0\n", nil,
			[]string{`storage.upload_concurrency: "0" is out of range; use 1 to 64`}},
		{"too much upload concurrency", "storage:\n  upload_concurrency: 65\n", nil,
			[]string{`storage.upload_concurrency: "65" is out of range; use 1 to 64`}},
		{"negative retries", "storage:\n  max_retries: -1\n", nil,
			[]string{`storage.max_retries: "-1" is out of range; use 0 (fail on the first error) to 50`}},
		{"too many retries", "storage:\n  max_retries: 51\n", nil,
			[]string{`storage.max_retries: "51" is out of range; use 0 (fail on the first error) to 50`}},
		{"bad topic id policy", "storage:\n  topic_id_change: adopt\n", nil,
			[]string{`storage.topic_id_change: "adopt" is not valid; use fail or start_fresh`}},
		{"bad conditional writes policy", "storage:\n  conditional_writes: skip\n", nil,
			[]string{`storage.conditional_writes: "skip" is not valid; use required or unsafe_ignore`}},

		// file
		{"file limits out of range", "file:\n  max_records: -1\n  max_bytes: 512B\n  max_age: 500ms\n", nil, []string{
			`file.max_records: "-1" can't be negative; use 0 for no limit`,
			`file.max_bytes: "512B" is too small; use at least 1KiB`,
			`file.max_age: "500ms" is too short; use at least 1s`,
		}},

		// format
		{"format empty", "format:\n  type: ''\n", nil,
			[]string{`format.type: is empty; use jsonl, json, csv, bytes, avro or parquet`}},
		{"format values", "format:\n  type: xml\n  compression: lz4\n  value_encoding: hex\n", nil, []string{
			`format.type: "xml" is not valid; use jsonl, json, csv, bytes, avro or parquet`,
			`format.compression: "lz4" is not valid; use none, gzip, snappy or zstd`,
			`format.value_encoding: "hex" is not valid; use none or base64`,
		}},
		{"fields unknown and repeated", "format:\n  fields: [key, body, key]\n", nil, []string{
			`format.fields: "body" is not a field; use key, value, offset, timestamp, headers or partition`,
			`format.fields: "key" is listed twice`,
		}},
		{"no fields", "format:\n  fields: []\n", nil, []string{
			"format.fields: required; list the record parts to write, such as [key, value, offset, timestamp, headers]",
		}},
		{"no envelope needs one field", "format:\n  envelope: false\n  fields: [key, value]\n", nil, []string{
			"format.fields: must list exactly one field when format.envelope is false (that field is written bare), such as [value]; it lists 2",
		}},
		{"bytes writes the value alone", "format:\n  type: bytes\n  fields: [key, value]\n", nil, []string{
			`format.fields: "key, value" can't be written by format.type bytes, which writes the value alone; set format.fields to [value] (or leave it unset), or use format.type csv or jsonl for other fields`,
		}},
		{"bytes separator with an unknown escape", "format:\n  type: bytes\n  bytes_separator: '\\q'\n", nil, []string{
			`format.bytes_separator: "\\q" has an unknown escape \q; use \n, \r, \t, \0, \\ or \xHH`,
		}},
		{"bytes separator with a lone backslash", "format:\n  type: bytes\n  bytes_separator: 'a\\'\n", nil, []string{
			`format.bytes_separator: "a\\" ends in a lone backslash; write \\ for a backslash`,
		}},
		{"bytes separator with a short hex escape", "format:\n  type: bytes\n  bytes_separator: '\\x0'\n", nil, []string{
			`format.bytes_separator: "\\x0" has \x without two hex digits; write a byte as \x0a`,
		}},
		{"bytes separator for another format", "format:\n  type: csv\n  bytes_separator: '\\r\\n'\n", nil, []string{
			`format.bytes_separator: "\\r\\n" is used only by format.type bytes; remove it, or set format.type: bytes`,
		}},

		// backpressure
		{"memory limit too small", "backpressure:\n  memory_limit: 32MiB\n", nil,
			[]string{`backpressure.memory_limit: "32MiB" is too small; use auto or at least 64MiB`}},
		{"memory limit neither auto nor a size", "backpressure:\n  memory_limit: lots\n", nil,
			[]string{`backpressure.memory_limit: "lots" is not auto or a size; use a number with a unit such as 64MiB, 1GB, 512KiB`}},
		{"memory limit empty", "backpressure:\n  memory_limit: ''\n", nil,
			[]string{"backpressure.memory_limit: is empty; use auto or a size of at least 64MiB such as 1GiB"}},
		{"disk limit too small", "backpressure:\n  disk_limit: 1MiB\n", nil,
			[]string{`backpressure.disk_limit: "1MiB" is too small; use auto or at least 16MiB`}},
		{"disk limit not a size", "backpressure:\n  disk_limit: plenty\n", nil,
			[]string{`backpressure.disk_limit: "plenty" is not auto or a size; use a number with a unit such as 64MiB, 1GB, 512KiB`}},
		{"disk limit zero", "backpressure:\n  disk_limit: 0\n", nil,
			[]string{`backpressure.disk_limit: "0B" is too small; use auto or at least 16MiB`}},
		{"spool dir a file", "backpressure:\n  spool_dir: /etc/hostname\n", nil,
			[]string{`backpressure.spool_dir: "/etc/hostname" is not a directory; give a local directory Spillway can create and write, or "" to keep open files in memory`}},
		{"spool dir under a file", "backpressure:\n  spool_dir: /etc/hostname/spool\n", nil,
			[]string{`backpressure.spool_dir: "/etc/hostname/spool" can't be created: /etc/hostname is not a directory; give a local directory Spillway can create and write, or "" to keep open files in memory`}},
		{"negative derived limits", "backpressure:\n  max_buffered_records: -1\n  max_open_files: -2\n", nil, []string{
			`backpressure.max_buffered_records: "-1" can't be negative; use 0 to derive it from the memory limit`,
			`backpressure.max_open_files: "-2" can't be negative; use 0 to derive it from the memory limit`,
		}},

		// errors, admin, log, shutdown
		{"error policy", "errors:\n  tolerance: some\n  dead_letter_topic: dead letters\n  null_values: skip\n", nil, []string{
			`errors.tolerance: "some" is not valid; use none or all`,
			`errors.dead_letter_topic: "dead letters" is not a valid topic name; use 1 to 249 letters, digits, '.', '_' or '-', or "" for none`,
			`errors.null_values: "skip" is not valid; use write, ignore or fail`,
		}},
		{"admin listen without port", "admin:\n  listen: '8080'\n", nil,
			[]string{`admin.listen: "8080" is not host:port; use host:port such as 127.0.0.1:8080 or :8080, or "" to disable the endpoint`}},
		{"admin token and tls", "admin:\n  token: ' tok'\n  token_file: /nonexistent/token\n  tls:\n    cert_file: /nonexistent/cert.pem\n", nil, []string{
			`admin.token_file: "/nonexistent/token" is set with admin.token; set one of them`,
			"admin.token: has leading or trailing white space; remove it (clients send the token as it is)",
			"admin.tls.key_file: required when admin.tls.cert_file is set: the server certificate needs its private key",
			`admin.token_file: "/nonexistent/token" does not exist; give the path of a file that holds the token`,
			`admin.tls.cert_file: "/nonexistent/cert.pem" does not exist; give the path of a PEM file`,
		}},
		{"admin token with the endpoint off", "admin:\n  listen: ''\n  token: tok\n", nil, []string{
			`admin.token: is set but admin.listen is "" (the endpoint is off); unset it, or set admin.listen`,
		}},
		{"log settings", "log:\n  level: verbose\n  format: ''\n", nil, []string{
			`log.level: "verbose" is not valid; use debug, info, warn or error`,
			"log.format: is empty; use text or json",
		}},
		{"shutdown timeout zero", "shutdown:\n  timeout: 0s\n", nil,
			[]string{`shutdown.timeout: "0s" must be positive; use a duration such as 30s`}},

		// The environment.
		{"unknown variable, close to a real one", "", append([]string{"SPILLWAY_KAFKA_TOPCS=a"}, baseEnv...),
			[]string{"SPILLWAY_KAFKA_TOPCS: unknown environment variable; did you mean SPILLWAY_KAFKA_TOPICS?"}},
		{"unknown variable, nothing close", "", append([]string{"SPILLWAY_COLOUR=1"}, baseEnv...),
			[]string{"SPILLWAY_COLOUR: unknown environment variable; variables are SPILLWAY_ followed by a key in upper case with _ for ., such as SPILLWAY_KAFKA_BROKERS for kafka.brokers"}},
		{"bad values from the environment", "", append([]string{"SPILLWAY_FILE_MAX_BYTES=12XB", "SPILLWAY_FORMAT_ENVELOPE=yes please", "SPILLWAY_LOG_LEVEL="}, baseEnv...), []string{
			`SPILLWAY_FILE_MAX_BYTES: "12XB" is not a size; use a number with a unit such as 64MiB, 1GB, 512KiB (units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)`,
			`SPILLWAY_FORMAT_ENVELOPE: "yes please" is not valid; use true or false`,
			"log.level: is empty; use debug, info, warn or error",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = baseEnv
			}
			e := loadErr(t, tt.yaml, env)
			got := strings.Split(e.Error(), "\n")
			if !reflect.DeepEqual(got, tt.lines) {
				t.Errorf("error lines:\n got %q\nwant %q", got, tt.lines)
			}
			if len(e.Problems) != len(tt.lines) {
				t.Errorf("%d problems, want %d", len(e.Problems), len(tt.lines))
			}
		})
	}
}

// TestNameTemplate checks that a template which can't name files uniquely
// is refused under its key. The wording of a parse error belongs to package
// naming, so only the key and the named variable are asserted.
func TestNameTemplate(t *testing.T) {
	tests := []struct {
		template string
		mention  string
	}{
		{"{{topic}}-{{start_offset}}", "{{partition}}"},
		{"{{topic}}-{{partition}}", "{{start_offset}}"},
		{"{{partition}}-{{start_offset}}", "{{topic}}"},
		{"{{topic}}-{{partition}}-{{start_offset}}-{{bogus}}", "bogus"},
		{"{{topic}}-{{partition}}-{{start_offset", ""},
		{"{{topic}}/{{partition}}/{{timestamp:unit=HH}}", "{{start_offset}}"},
		{"{{topic}}-{{partition}}-{{key}}{{start_offset}}", "{{key}}"},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			e := loadErr(t, "file:\n  name_template: '"+tt.template+"'\n", baseEnv)
			if len(e.Problems) != 1 {
				t.Fatalf("want 1 problem, got %v", e)
			}
			msg := e.Error()
			if !strings.HasPrefix(msg, "file.name_template: ") || !strings.Contains(msg, tt.mention) {
				t.Errorf("got %q, want it to start with file.name_template: and mention %q", msg, tt.mention)
			}
		})
	}
	for _, ok := range []string{
		"{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}.jsonl",
		"{{timestamp:unit=yyyy}}/{{topic}}-{{partition}}-{{start_offset}}",
		"dt={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/hour={{timestamp:unit=HH}}/key={{key}}/{{topic}}-{{partition}}-{{start_offset}}",
	} {
		if _, err := LoadBytes([]byte("file:\n  name_template: '"+ok+"'\n"), baseEnv); err != nil {
			t.Errorf("template %q: %v", ok, err)
		}
	}
}

// TestFileExtension: auto by default, any safe suffix or none when set,
// and a message naming the forms it takes otherwise.
func TestFileExtension(t *testing.T) {
	for yaml, want := range map[string]string{
		"":                                      "auto",
		"file:\n  extension: ''\n":              "",
		"file:\n  extension: .gz\n":             ".gz",
		"file:\n  extension: .snappy.parquet\n": ".snappy.parquet",
	} {
		c, err := LoadBytes([]byte(yaml), baseEnv)
		if err != nil {
			t.Errorf("%q: %v", yaml, err)
			continue
		}
		if c.File.Extension != want {
			t.Errorf("%q: extension %q, want %q", yaml, c.File.Extension, want)
		}
	}
	for _, bad := range []string{"gz", ".a/b", "..", ".gz.", ". x"} {
		e := loadErr(t, "file:\n  extension: '"+bad+"'\n", baseEnv)
		if !strings.Contains(e.Error(), "file.extension: \""+bad+"\" is not a file name extension; use auto") {
			t.Errorf("%q: %v", bad, e)
		}
	}
}

// TestFileTimestamp covers the two keys that say what {{timestamp}}
// renders: their defaults, the values they take, and the messages for the
// values they don't.
func TestFileTimestamp(t *testing.T) {
	for _, tt := range []struct {
		yaml   string
		env    []string
		source string
		zone   string
	}{
		{"", nil, "wallclock", "UTC"},
		{"file:\n  timestamp_source: Event\n  timezone: Europe/Berlin\n", nil, "event", "Europe/Berlin"},
		{"", []string{"SPILLWAY_FILE_TIMESTAMP_SOURCE=WALLCLOCK", "SPILLWAY_FILE_TIMEZONE=+05:30"}, "wallclock", "+05:30"},
		{"file:\n  timezone: Z\n", nil, "wallclock", "Z"},
	} {
		c, err := LoadBytes([]byte(tt.yaml), append(slices.Clone(baseEnv), tt.env...))
		if err != nil {
			t.Errorf("%q %q: %v", tt.yaml, tt.env, err)
			continue
		}
		if c.File.TimestampSource != tt.source || c.File.Timezone != tt.zone {
			t.Errorf("%q %q: timestamp_source %q, timezone %q; want %q, %q", tt.yaml, tt.env, c.File.TimestampSource, c.File.Timezone, tt.source, tt.zone)
		}
	}
	const zoneFix = "; use an IANA name such as UTC or Europe/Berlin, or a UTC offset such as +02:00"
	for _, tt := range []struct {
		yaml string
		want []string
	}{
		{"file:\n  timestamp_source: record\n", []string{`file.timestamp_source: "record" is not valid; use wallclock or event`}},
		{"file:\n  timestamp_source: ''\n", []string{`file.timestamp_source: is empty; use wallclock or event`}},
		{"file:\n  timezone: Europe/Berln\n", []string{`file.timezone: "Europe/Berln" is not a known time zone` + zoneFix}},
		{"file:\n  timezone: Local\n", []string{`file.timezone: "Local" is the machine's own zone, which can differ between instances` + zoneFix}},
		{"file:\n  timezone: ''\n", []string{`file.timezone: is empty` + zoneFix}},
		// A bad zone doesn't hide a bad template: both are reported.
		{"file:\n  timezone: Mars/Olympus\n  name_template: '{{topic}}'\n", []string{
			`file.timezone: "Mars/Olympus" is not a known time zone` + zoneFix,
			`file.name_template: file name template "{{topic}}": template has no {{partition}}: without it two files get the same name and the second overwrites the first; the default is {{topic}}-{{partition}}-{{start_offset}}`,
		}},
	} {
		e := loadErr(t, tt.yaml, baseEnv)
		if got := strings.Split(e.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q:\n got %q\nwant %q", tt.yaml, got, tt.want)
		}
	}
}

// TestAllProblemsAtOnce: a user fixes a broken config in one pass, not one
// restart per mistake.
func TestAllProblemsAtOnce(t *testing.T) {
	yaml := `
kafka:
  topcs: [events]
  start_offset: newest
storage:
  part_size: 1KiB
format:
  type: xml
log:
  level: loud
`
	e := loadErr(t, yaml, []string{"SPILLWAY_SHUTDOWN_TIMEOUT=forever"})
	want := []string{
		"kafka.topcs: unknown key; did you mean kafka.topics?",
		`SPILLWAY_SHUTDOWN_TIMEOUT: "forever" is not a duration; use Go syntax such as 5m, 30s or 1h30m`,
		`kafka.topics: required; list the topics to consume, such as ["events"], or set kafka.topic_regex to a pattern such as "events\\..*"`,
		`kafka.start_offset: "newest" is not valid; use earliest or latest`,
		"storage.url: required; set it to a gocloud URL such as file:///var/lib/spillway/out or s3://bucket?region=us-east-1",
		`storage.part_size: "1KiB" is too small; use at least 64KiB`,
		`format.type: "xml" is not valid; use jsonl, json, csv, bytes, avro or parquet`,
		`log.level: "loud" is not valid; use debug, info, warn or error`,
	}
	if got := strings.Split(e.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("error lines:\n got %q\nwant %q", got, want)
	}
	if e.Problems[0] != (Problem{Key: "kafka.topcs", Msg: "unknown key; did you mean kafka.topics?"}) {
		t.Errorf("Problems[0] = %+v", e.Problems[0])
	}
}

func TestDefaults(t *testing.T) {
	c, err := LoadBytes(nil, baseEnv)
	if err != nil {
		t.Fatal(err)
	}
	// The defaults users rely on, written out rather than taken from
	// Default() (which docs/config.md is generated from), so that a
	// changed default fails here and not only in the reference.
	want := &Config{
		Kafka: Kafka{
			Brokers: []string{"127.0.0.1:9092"}, Group: "spillway", Topics: []string{"events"},
			StartOffset: "earliest", ClientID: "spillway", SessionTimeout: 45 * time.Second, StartupTimeout: time.Minute,
		},
		Storage: Storage{URL: "file:///tmp/spillway-out", PartSize: 8 << 20, UploadConcurrency: 4, MaxRetries: 9, TopicIDChange: "fail", EarlierFiles: "none", ConditionalWrites: "required"},
		File: File{
			NameTemplate:    "{{topic}}-{{partition}}-{{start_offset}}",
			TimestampSource: "wallclock", Timezone: "UTC", Extension: "auto",
			MaxBytes: 128 << 20, MaxAge: 5 * time.Minute,
		},
		Format: Format{
			Type: "jsonl", Compression: "none", Fields: []string{"key", "value", "offset", "timestamp", "headers"},
			ValueEncoding: "none", Envelope: true, BytesSeparator: `\n`,
		},
		SchemaRegistry: registry.Options{Decode: "value"},
		Backpressure:   Backpressure{MemoryLimit: "auto", DiskLimit: "auto"},
		Errors:         Errors{Tolerance: "none", NullValues: "write"},
		Iceberg:        iceberg.Defaults(),
		Admin:          admin.Options{Listen: "127.0.0.1:8080"},
		Log:            Log{Level: "info", Format: "text"},
		Shutdown:       Shutdown{Timeout: 30 * time.Second},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

// TestEnvOverrides: every key is settable from the environment, the
// environment wins over the file, keys with underscores map whole, and
// lists are comma-separated.
func TestEnvOverrides(t *testing.T) {
	yaml := `
kafka:
  brokers: ["file:9092"]
  topics: [from-file]
  start_offset: earliest
storage:
  url: file:///from/file
`
	env := []string{
		"PATH=/usr/bin",            // not ours
		"spillway_log_level=debug", // prefix is case-sensitive: not ours
		"SPILLWAY_KAFKA_BROKERS=k1:9092, k2:9093,",
		"SPILLWAY_KAFKA_TOPICS=a,b",
		"SPILLWAY_KAFKA_START_OFFSET=Latest",
		"SPILLWAY_KAFKA_CLIENT_ID=spill-1",
		"SPILLWAY_KAFKA_SASL_MECHANISM=scram-sha-512",
		"SPILLWAY_KAFKA_SASL_USERNAME=me",
		"SPILLWAY_KAFKA_SASL_PASSWORD=p=w,1", // '=' and ',' survive in a string
		"SPILLWAY_STORAGE_URL=mem://",
		"SPILLWAY_STORAGE_UPLOAD_CONCURRENCY=8",
		"SPILLWAY_FILE_MAX_BYTES=64 MiB",
		"SPILLWAY_FILE_MAX_AGE=90s",
		"SPILLWAY_FORMAT_FIELDS=VALUE",
		"SPILLWAY_FORMAT_ENVELOPE=false",
		"SPILLWAY_BACKPRESSURE_MEMORY_LIMIT=1gib",
		"SPILLWAY_ADMIN_LISTEN=",
		"SPILLWAY_SHUTDOWN_TIMEOUT=10s",
	}
	c, err := LoadBytes([]byte(yaml), env)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Kafka.Brokers = []string{"k1:9092", "k2:9093"}
	want.Kafka.Topics = []string{"a", "b"}
	want.Kafka.StartOffset = "latest"
	want.Kafka.ClientID = "spill-1"
	want.Kafka.SASL = SASL{Mechanism: "SCRAM-SHA-512", Username: "me", Password: "p=w,1"}
	want.Storage.URL = "mem://"
	want.Storage.UploadConcurrency = 8
	want.File.MaxBytes = 64 << 20
	want.File.MaxAge = 90 * time.Second
	want.Format.Fields = []string{"value"}
	want.Format.Envelope = false
	want.Backpressure.MemoryLimit = "1GiB"
	want.Admin.Listen = ""
	want.Shutdown.Timeout = 10 * time.Second
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

// TestKeysAreTheContract pins the key names and their variables, as
// docs/config.md lists them: users' configs and deployments rely on them,
// so a rename fails here before it reaches the generated reference.
func TestKeysAreTheContract(t *testing.T) {
	design := []string{
		"kafka.brokers", "kafka.group", "kafka.topics", "kafka.topic_regex", "kafka.start_offset", "kafka.client_id", "kafka.instance_id", "kafka.session_timeout", "kafka.startup_timeout",
		"kafka.tls.enabled", "kafka.tls.ca_file", "kafka.tls.cert_file", "kafka.tls.key_file",
		"kafka.sasl.mechanism", "kafka.sasl.username", "kafka.sasl.password",
		"storage.url", "storage.prefix", "storage.part_size", "storage.upload_concurrency", "storage.max_retries", "storage.topic_id_change", "storage.earlier_files", "storage.conditional_writes",
		"file.name_template", "file.timestamp_source", "file.timezone", "file.extension", "file.max_records", "file.max_bytes", "file.max_age",
		"format.type", "format.compression", "format.fields", "format.value_encoding", "format.envelope", "format.bytes_separator",
		"schema_registry.url", "schema_registry.username", "schema_registry.password", "schema_registry.decode",
		"schema_registry.tls.ca_file", "schema_registry.tls.cert_file", "schema_registry.tls.key_file",
		"backpressure.memory_limit", "backpressure.max_buffered_records", "backpressure.max_open_files", "backpressure.spool_dir", "backpressure.disk_limit",
		"errors.tolerance", "errors.dead_letter_topic", "errors.null_values",
		"iceberg.table", "iceberg.catalog.type", "iceberg.catalog.uri", "iceberg.catalog.warehouse", "iceberg.catalog.credential", "iceberg.catalog.token", "iceberg.catalog.tls.ca_file",
		"iceberg.catalog.tls.cert_file", "iceberg.catalog.tls.key_file", "iceberg.catalog.region", "iceberg.catalog.catalog_id", "iceberg.catalog.properties",
		"iceberg.partition_by", "iceberg.commit_interval", "iceberg.auto_create", "iceberg.evolve_schema",
		"iceberg.expire_snapshots.enabled", "iceberg.expire_snapshots.max_age", "iceberg.expire_snapshots.keep_last",
		"admin.listen", "admin.token", "admin.token_file", "admin.tls.cert_file", "admin.tls.key_file", "admin.stall_timeout", "log.level", "log.format", "shutdown.timeout",
	}
	var got []string
	for _, l := range keys.leaves {
		got = append(got, l.key)
	}
	if !reflect.DeepEqual(got, design) {
		t.Errorf("keys (in order):\n got %q\nwant %q", got, design)
	}
	for name, key := range map[string]string{
		"SPILLWAY_KAFKA_BROKERS":            "kafka.brokers",
		"SPILLWAY_KAFKA_START_OFFSET":       "kafka.start_offset",
		"SPILLWAY_KAFKA_SASL_PASSWORD":      "kafka.sasl.password",
		"SPILLWAY_SCHEMA_REGISTRY_PASSWORD": "schema_registry.password",
		"SPILLWAY_KAFKA_TLS_CA_FILE":        "kafka.tls.ca_file",
		"SPILLWAY_SHUTDOWN_TIMEOUT":         "shutdown.timeout",
		"SPILLWAY_FILE_TIMESTAMP_SOURCE":    "file.timestamp_source",
		"SPILLWAY_FILE_TIMEZONE":            "file.timezone",
	} {
		if s := keys.byEnv[name]; s == nil || s.key != key {
			t.Errorf("%s maps to %v, want %s", name, s, key)
		}
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("ok, env wins", func(t *testing.T) {
		p := write("ok.yaml", "kafka:\n  topics: [events]\nstorage:\n  url: file:///data\nlog:\n  level: warn\n")
		c, err := Load(p, []string{"SPILLWAY_LOG_LEVEL=debug"})
		if err != nil {
			t.Fatal(err)
		}
		if c.Storage.URL != "file:///data" || c.Log.Level != "debug" {
			t.Errorf("got url %q level %q", c.Storage.URL, c.Log.Level)
		}
	})
	t.Run("no file", func(t *testing.T) {
		if _, err := Load("", baseEnv); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.yaml"), baseEnv)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want fs.ErrNotExist", err)
		}
	})

	syntax := []struct{ name, body, want string }{
		{"tab.yaml", "kafka:\n  topics: [a]\n\tgroup: g\n",
			":3: YAML syntax error: found character that cannot start any token (indent YAML with spaces, not tabs)"},
		{"colon.yaml", "kafka:\n  topics: [a]\nlog\nadmin: {}\n",
			":3: YAML syntax error: could not find expected ':'"},
		{"list.yaml", "- hunter2\n", ": the config must be a mapping of keys such as kafka: and storage:"},
	}
	for _, tt := range syntax {
		t.Run(tt.name, func(t *testing.T) {
			p := write(tt.name, tt.body)
			_, err := Load(p, baseEnv)
			if err == nil || err.Error() != p+tt.want {
				t.Errorf("got %v\nwant %s", err, p+tt.want)
			}
		})
	}
}

// TestValidate covers a Config built in code, as the CLI does after
// applying flags.
func TestValidate(t *testing.T) {
	c := Default()
	c.Storage.URL = "gs://bucket"
	c.Kafka.TopicRegex = `events\..*`
	if err := c.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	c.Storage.UploadConcurrency = 100
	err := c.Validate()
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 1 || e.Problems[0].Key != "storage.upload_concurrency" {
		t.Errorf("got %v", err)
	}
}

// TestColumnarFormats: avro and parquet are built, with every compression.
func TestColumnarFormats(t *testing.T) {
	for _, tc := range []struct{ yaml, typ, compression string }{
		{"format:\n  type: Parquet\n  compression: ZSTD\n", "parquet", "zstd"},
		{"format:\n  type: avro\n  compression: snappy\n  value_encoding: base64\n", "avro", "snappy"},
		{"format:\n  type: AVRO\n  fields: [value]\n  envelope: false\n", "avro", "none"},
	} {
		c, err := LoadBytes([]byte(tc.yaml), baseEnv)
		if err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
			continue
		}
		if c.Format.Type != tc.typ || c.Format.Compression != tc.compression {
			t.Errorf("%q: loaded type %q compression %q, want %q %q", tc.yaml, c.Format.Type, c.Format.Compression, tc.typ, tc.compression)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"topics", "topics", 0},
		{"topcs", "topics", 1}, {"kafak", "kafka", 2}, {"kitten", "sitting", 3}, {"héllo", "hello", 1},
	} {
		if d := levenshtein(tt.a, tt.b); d != tt.d {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, d, tt.d)
		}
	}
	cands := []string{"kafka", "log", "storage"}
	for _, tt := range []struct{ in, want string }{
		{"kafak", "kafka"}, {"storag", "storage"}, {"foo", ""}, {"lg", "log"}, {"x", ""},
	} {
		if got, _ := nearest(tt.in, cands); got != tt.want {
			t.Errorf("nearest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestMemoryLimitMinimumIsTheBudgets checks that config accepts exactly the
// limits budget.NewPlan can plan for, at the boundary.
func TestMemoryLimitMinimumIsTheBudgets(t *testing.T) {
	for _, n := range []int64{budget.MinMemoryLimit - 1, budget.MinMemoryLimit} {
		_, planErr := budget.NewPlan(n)
		_, loadErr := LoadBytes([]byte(fmt.Sprintf("backpressure:\n  memory_limit: %d\n", n)), baseEnv)
		if (planErr == nil) != (loadErr == nil) {
			t.Errorf("memory_limit %d: budget.NewPlan says %v, config says %v", n, planErr, loadErr)
		}
	}
}

func TestTopicPattern(t *testing.T) {
	if re, err := (&Kafka{}).TopicPattern(); re != nil || err != nil {
		t.Errorf("unset: TopicPattern() = %v, %v; want nil, nil", re, err)
	}
	re, err := (&Kafka{TopicRegex: `events\.`}).TopicPattern()
	if err != nil {
		t.Fatal(err)
	}
	// Unanchored, as kgo.ConsumeRegex matches.
	if !re.MatchString("prod.events.clicks") || re.MatchString("events-x") {
		t.Errorf("pattern %s matches wrongly", re)
	}
	_, err = (&Kafka{TopicRegex: "("}).TopicPattern()
	var e *Error
	if !errors.As(err, &e) || err.Error() != `kafka.topic_regex: "(" is not a valid regular expression: missing closing )` {
		t.Errorf("bad pattern: err = %v, want an *Error naming kafka.topic_regex", err)
	}
}

// TestFileURLs checks the local directory forms storage.url accepts and what
// each resolves to: a relative path is made absolute against the working
// directory, so that the effective config says where files will land.
func TestFileURLs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ in, want string }{
		{"file:///var/out", "file:///var/out"},
		{"file:/var/out", "file:/var/out"},
		{"file://localhost/var/out", "file://localhost/var/out"},
		{"file:///", "file:///"},
		{"file:out", "file://" + wd + "/out"},
		{"file:./out/", "file://" + wd + "/out"},
		{"file:a/../b", "file://" + wd + "/b"},
		{"file:my%20out", "file://" + wd + "/my%20out"},
		{"FILE:out", "file://" + wd + "/out"},
	} {
		c, err := LoadBytes([]byte("storage:\n  url: '"+tt.in+"'\n"), topicsEnv)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if c.Storage.URL != tt.want {
			t.Errorf("%s: storage.url = %s, want %s", tt.in, c.Storage.URL, tt.want)
		}
	}
	// Built in code, a relative path is not resolved: storage would refuse it.
	c := Default()
	c.Kafka.Topics, c.Storage.URL = []string{"events"}, "file:out"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `storage.url: "file:out" has a relative path`) {
		t.Errorf("Validate of file:out = %v, want a relative path error", err)
	}
}

// TestTextFormats: csv and bytes are built; neither has an envelope to
// leave out, and format.bytes_separator reads the same escapes from YAML in
// any quoting and from the environment.
func TestTextFormats(t *testing.T) {
	for _, tt := range []struct {
		name string
		yaml string
		env  []string
		sep  string // the bytes Separator() gives
	}{
		{"csv with several fields and no envelope", "format:\n  type: CSV\n  envelope: false\n  fields: [offset, key, value]\n", nil, "\n"},
		{"bytes with the default fields", "format:\n  type: bytes\n", nil, "\n"},
		{"bytes with the value alone and no envelope", "format:\n  type: bytes\n  fields: [value]\n  envelope: false\n", nil, "\n"},
		{"bytes separator escaped in single quotes", "format:\n  type: bytes\n  bytes_separator: '\\r\\n'\n", nil, "\r\n"},
		{"bytes separator as a real line break", "format:\n  type: bytes\n  bytes_separator: \"\\n\"\n", nil, "\n"},
		{"bytes separator empty", "format:\n  type: bytes\n  bytes_separator: ''\n", nil, ""},
		{"bytes separator of several characters", "format:\n  type: bytes\n  bytes_separator: '--\\x1e\\t\\\\'\n", nil, "--\x1e\t\\"},
		{"bytes separator from the environment", "format:\n  type: bytes\n", []string{`SPILLWAY_FORMAT_BYTES_SEPARATOR=\0`}, "\x00"},
		{"a real line break with another format", "format:\n  type: jsonl\n  bytes_separator: \"\\n\"\n", nil, "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadBytes([]byte(tt.yaml), append(tt.env, baseEnv...))
			if err != nil {
				t.Fatalf("LoadBytes: %v", err)
			}
			sep, err := c.Format.Separator()
			if err != nil || string(sep) != tt.sep {
				t.Errorf("Separator() = %q, %v; want %q", sep, err, tt.sep)
			}
		})
	}
}

// TestLatestPerKeyTemplates: templates with {{key}} and no {{start_offset}}
// name one object per key (package latest) and are accepted by check and
// run alike.
func TestLatestPerKeyTemplates(t *testing.T) {
	for _, tpl := range []string{"{{key}}", "{{topic}}/{{partition}}/{{key}}", "{{topic}}/key={{key}}"} {
		t.Run(tpl, func(t *testing.T) {
			c, err := Load("", append([]string{"SPILLWAY_FILE_NAME_TEMPLATE=" + tpl}, baseEnv...))
			if err != nil {
				t.Fatalf("%s refused: %v", tpl, err)
			}
			if c.File.NameTemplate != tpl {
				t.Fatalf("template %q, want %q", c.File.NameTemplate, tpl)
			}
		})
	}
}

// TestKubernetesServiceLinks: the variables Kubernetes injects for Services
// whose names start with spillway (spillway, spillway-metrics) are not
// config, and must not stop a pod with exit 2; a misspelt key still does.
func TestKubernetesServiceLinks(t *testing.T) {
	links := []string{
		"SPILLWAY_SERVICE_HOST=10.0.0.1", "SPILLWAY_SERVICE_PORT=8080", "SPILLWAY_SERVICE_PORT_ADMIN=8080",
		"SPILLWAY_PORT=tcp://10.0.0.1:8080", "SPILLWAY_PORT_8080_TCP=tcp://10.0.0.1:8080",
		"SPILLWAY_PORT_8080_TCP_PROTO=tcp", "SPILLWAY_PORT_8080_TCP_PORT=8080", "SPILLWAY_PORT_8080_TCP_ADDR=10.0.0.1",
		"SPILLWAY_METRICS_SERVICE_HOST=10.0.0.2", "SPILLWAY_METRICS_SERVICE_PORT=9090", "SPILLWAY_METRICS_SERVICE_PORT_HTTP=9090",
		"SPILLWAY_METRICS_PORT=tcp://10.0.0.2:9090", "SPILLWAY_METRICS_PORT_9090_TCP_ADDR=10.0.0.2",
	}
	if _, err := Load("", append(links, baseEnv...)); err != nil {
		t.Fatalf("service link variables refused: %v", err)
	}
	e := loadErr(t, "", append([]string{"SPILLWAY_METRICS_SERVICE_HOSTS=x"}, baseEnv...))
	if len(e.Problems) != 1 || !strings.Contains(e.Error(), "SPILLWAY_METRICS_SERVICE_HOSTS: unknown environment variable") {
		t.Fatalf("a name that is no service link: %v", e)
	}
}
