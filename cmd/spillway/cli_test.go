package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// cli runs the command in-process through run and returns its exit code,
// stdout and stderr.
func cli(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb, environ)
	return code, out.String(), errb.String()
}

// writeFile writes content to name in a fresh temp dir and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func wantCode(t *testing.T, got, want int, stdout, stderr string) {
	t.Helper()
	if got != want {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", got, want, stdout, stderr)
	}
}

func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}

// A minimal valid config; tests append to it or replace parts.
const minimalConfig = `kafka:
  brokers: ["127.0.0.1:9092"]
  topics: [events]
storage:
  url: file:///var/lib/spillway/out
`

func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, nil, "version")
	wantCode(t, code, exitOK, out, errOut)
	if out != "spillway "+version+"\n" {
		t.Errorf("stdout = %q, want %q", out, "spillway "+version+"\n")
	}
	if errOut != "" {
		t.Errorf("stderr = %q, want nothing", errOut)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "spillway.yaml", minimalConfig)
	cases := []struct {
		name string
		args []string
		want []string // in stderr
		bug  string   // non-empty: a known bug, the case is skipped
	}{
		{name: "unknown flag", args: []string{"version", "--nope"}, want: []string{"unknown flag: --nope"}},
		{name: "unknown flag on run", args: []string{"run", "--config", cfg, "--bogus"}, want: []string{"unknown flag: --bogus"}},
		{name: "unknown flag on config check", args: []string{"config", "check", "--bogus", cfg}, want: []string{"unknown flag: --bogus"}},
		{name: "unknown shorthand flag", args: []string{"run", "-z"}, want: []string{"-z"}},
		{name: "bad flag value", args: []string{"demo", "--records", "many"}, want: []string{"--records", `"many"`}},
		{name: "run without --config", args: []string{"run"}, want: []string{"run needs --config FILE"}},
		{name: "config check without FILE", args: []string{"config", "check"}, want: []string{"exactly one FILE"}},
		{name: "config check with two FILEs", args: []string{"config", "check", cfg, cfg}, want: []string{"exactly one FILE"}},
		{name: "run with a missing config", args: []string{"run", "--config", "/nonexistent/spillway.yaml"}, want: []string{"/nonexistent/spillway.yaml"}},
		{name: "run with an invalid config", args: []string{"run", "-c", writeFile(t, "bad.yaml", "kafka:\n  topics: [events]\n")}, want: []string{"storage.url: required"}},
		{
			name: "unknown command", args: []string{"bogus"}, want: []string{`unknown command "bogus"`},
		},
		{
			name: "extra argument", args: []string{"version", "extra"}, want: []string{"extra"},
		},
		{
			name: "unknown config subcommand", args: []string{"config", "bogus"}, want: []string{"bogus"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.bug != "" {
				t.Skip("BUG: " + tc.bug)
			}
			code, out, errOut := cli(t, nil, tc.args...)
			wantCode(t, code, exitUsage, out, errOut)
			wantContains(t, "stderr", errOut, tc.want...)
			if out != "" {
				t.Errorf("stdout should be empty on a usage error, got:\n%s", out)
			}
		})
	}
}

// TestConfigCheckValid checks the effective config printed for a valid file:
// exit 0, YAML, the secret redacted everywhere, other environment variables
// ignored, and the output itself a valid config that prints the same.
func TestConfigCheckValid(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Pa55w0rd-6b1f"
	path := writeFile(t, "spillway.yaml", `kafka:
  brokers: ["10.0.0.1:9092", "10.0.0.2:9092"]
  group: sinks
  topics: [events, clicks]
  sasl:
    mechanism: scram-sha-512
    username: svc
    password: "`+secret+`"
storage:
  url: file:///var/lib/spillway/out
file:
  max_records: 1000
format:
  compression: GZIP
shutdown:
  timeout: 20s
`)
	environ := []string{"HOME=/root", "PATH=/usr/bin", "NOT_SPILLWAY_X=1", "spillway_lower=ignored?"}
	code, out, errOut := cli(t, environ, "config", "check", path)
	wantCode(t, code, exitOK, out, errOut)
	if strings.Contains(out, secret) || strings.Contains(errOut, secret) {
		t.Fatalf("the SASL password leaked:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	wantContains(t, "stdout", out, "REDACTED")

	var got struct {
		Kafka struct {
			Brokers []string
			Group   string
			Topics  []string
			SASL    map[string]string `yaml:"sasl"`
		}
		Storage map[string]any
		File    map[string]any
		Format  map[string]any
		Admin   map[string]any
		Log     map[string]any
	}
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not YAML: %v\n%s", err, out)
	}
	if want := []string{"10.0.0.1:9092", "10.0.0.2:9092"}; !slices.Equal(got.Kafka.Brokers, want) {
		t.Errorf("kafka.brokers = %v, want %v", got.Kafka.Brokers, want)
	}
	if got.Kafka.Group != "sinks" || !slices.Equal(got.Kafka.Topics, []string{"events", "clicks"}) {
		t.Errorf("kafka.group/topics = %q/%v", got.Kafka.Group, got.Kafka.Topics)
	}
	if got.Kafka.SASL["password"] != "REDACTED" || got.Kafka.SASL["username"] != "svc" || got.Kafka.SASL["mechanism"] != "SCRAM-SHA-512" {
		t.Errorf("kafka.sasl = %v, want password REDACTED, username svc, mechanism SCRAM-SHA-512 (canonical case)", got.Kafka.SASL)
	}
	if got.Format["compression"] != "gzip" {
		t.Errorf("format.compression = %v, want gzip (canonical case)", got.Format["compression"])
	}
	// Defaults are filled in: the output is the effective config.
	if got.Format["type"] != "jsonl" || got.Admin["listen"] != "127.0.0.1:8080" || got.Log["level"] != "info" || got.File["max_records"] != 1000 {
		t.Errorf("defaults/overrides missing from the effective config:\n%s", out)
	}

	// The printed config is itself valid and a fixed point.
	again := writeFile(t, "effective.yaml", out)
	code2, out2, errOut2 := cli(t, nil, "config", "check", again)
	wantCode(t, code2, exitOK, out2, errOut2)
	if out2 != out {
		t.Errorf("config check of its own output differs:\nfirst:\n%s\nsecond:\n%s", out, out2)
	}
}

// TestConfigCheckSecretsNeverShown puts the secret where errors and overrides
// could echo it.
func TestConfigCheckSecretsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-9c4e7a"
	t.Run("from the environment", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "c.yaml", minimalConfig+"  prefix: logs/\n")
		env := []string{"SPILLWAY_KAFKA_SASL_MECHANISM=PLAIN", "SPILLWAY_KAFKA_SASL_USERNAME=u", "SPILLWAY_KAFKA_SASL_PASSWORD=" + secret}
		code, out, errOut := cli(t, env, "config", "check", path)
		wantCode(t, code, exitOK, out, errOut)
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("secret leaked:\n%s%s", out, errOut)
		}
		wantContains(t, "stdout", out, "password: REDACTED")
	})
	t.Run("schema registry password from the environment", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "c.yaml", minimalConfig+"schema_registry:\n  url: https://registry.example:8081\n  username: key\n")
		env := []string{"SPILLWAY_SCHEMA_REGISTRY_PASSWORD=" + secret}
		code, out, errOut := cli(t, env, "config", "check", path)
		wantCode(t, code, exitOK, out, errOut)
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("secret leaked:\n%s%s", out, errOut)
		}
		wantContains(t, "stdout", out, "password: REDACTED")
	})
	t.Run("numeric password", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "c.yaml", "kafka:\n  brokers: [\"h:1\"]\n  topics: [e]\n  sasl: {mechanism: PLAIN, username: u, password: 918273645546}\nstorage:\n  url: file:///x\n")
		code, out, errOut := cli(t, nil, "config", "check", path)
		wantCode(t, code, exitOK, out, errOut)
		if strings.Contains(out+errOut, "918273645546") {
			t.Fatalf("numeric secret leaked:\n%s%s", out, errOut)
		}
		wantContains(t, "stdout", out, "REDACTED")
	})
	t.Run("alongside errors", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "c.yaml", "kafka:\n  topics: [e]\n  start_offset: middle\n  sasl: {mechanism: PLAIN, username: u, password: \""+secret+"\"}\nstorage:\n  url: file:///x\n")
		code, out, errOut := cli(t, nil, "config", "check", path)
		wantCode(t, code, exitUsage, out, errOut)
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("secret leaked:\n%s%s", out, errOut)
		}
		wantContains(t, "stderr", errOut, "kafka.start_offset")
	})
	t.Run("in the storage URL", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{
			"s3://b?region=us-east-1;secret_access_key=" + secret, // ';' ends a parameter too
			"s3://" + secret + ":x@b?region=us-east-1",            // the user name of an access key
			"azblob://c?sp=r&sig=" + secret,
			"s3://b?region=us-east-1&endpoint=http://access-id:" + secret + "@127.0.0.1:9000&use_path_style=true", // an endpoint's userinfo
			"s3://b?region=us-east-1&endpoint=http%3A%2F%2Faccess-id%3A" + secret + "%40127.0.0.1%3A9000",
		} {
			path := writeFile(t, "c.yaml", "kafka:\n  topics: [e]\nstorage:\n  url: '"+url+"'\n")
			code, out, errOut := cli(t, nil, "config", "check", path)
			wantCode(t, code, exitOK, out, errOut)
			if strings.Contains(out+errOut, secret) {
				t.Errorf("secret leaked from %s:\n%s%s", url, out, errOut)
			}
			wantContains(t, "stdout", out, "REDACTED")
		}
	})
	t.Run("wrong type for the password", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "c.yaml", "kafka:\n  topics: [e]\n  sasl: {mechanism: PLAIN, username: u, password: [\""+secret+"\"]}\nstorage:\n  url: file:///x\n")
		code, out, errOut := cli(t, nil, "config", "check", path)
		wantCode(t, code, exitUsage, out, errOut)
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("secret leaked:\n%s%s", out, errOut)
		}
		wantContains(t, "stderr", errOut, "kafka.sasl.password")
	})
}

func TestConfigCheckUnknownKey(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "c.yaml", `kafka:
  topics: [events]
  topcs: [events]
storage:
  url: file:///x
`)
	code, out, errOut := cli(t, nil, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "stderr", errOut, "kafka.topcs: unknown key; did you mean kafka.topics?")
	if out != "" {
		t.Errorf("stdout should be empty, got:\n%s", out)
	}
	// The only problem is the unknown key.
	if n := strings.Count(strings.TrimSpace(errOut), "\n") + 1; n != 1 {
		t.Errorf("want exactly one problem line, got %d:\n%s", n, errOut)
	}

	// A known name in the wrong section.
	path = writeFile(t, "c2.yaml", minimalConfig+"  name_template: x\n")
	code, out, errOut = cli(t, nil, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "stderr", errOut, "storage.name_template", "did you mean file.name_template?")
}

func TestConfigCheckEveryProblemListed(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "c.yaml", `kafka:
  topics: [events]
  start_offset: middle
storage:
  url: file:///x
  upload_concurrency: 0
  part_size: 12 parsecs
file:
  max_age: 10
format:
  type: xml
log:
  level: loud
`)
	code, out, errOut := cli(t, nil, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	for _, want := range []string{
		`kafka.start_offset: "middle" is not valid; use earliest or latest`,
		`storage.upload_concurrency: "0" is out of range`,
		`storage.part_size: "12 parsecs" is not a size`,
		`file.max_age: "10" is not a duration`,
		`format.type: "xml" is not valid`,
		`log.level: "loud" is not valid`,
	} {
		wantContains(t, "stderr", errOut, want)
	}
	if out != "" {
		t.Errorf("stdout should be empty, got:\n%s", out)
	}
}

func TestConfigCheckMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "does-not-exist.yaml")
	code, out, errOut := cli(t, nil, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	// Each layer adds only what the one below doesn't say: the path once.
	if want := "spillway: config: open " + path + ": no such file or directory\n"; errOut != want {
		t.Errorf("stderr = %q, want %q", errOut, want)
	}
}

func TestConfigCheckYAMLSyntaxError(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "c.yaml", "kafka:\n  topics: [events\nstorage:\n  url: file:///x\n")
	code, out, errOut := cli(t, nil, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "stderr", errOut, path+":", "YAML syntax error")
}

func TestConfigCheckNameTemplate(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, tmpl, want string }{
		{"unknown variable", "{{bogus}}", `unknown variable "{{bogus}}"`},
		{"unclosed", "{{topic}}-{{partition}}-{{start_offset", `unclosed "{{"`},
		{"lone open", "{{", `unclosed "{{"`},
		{"missing start_offset", "{{topic}}-{{partition}}", "template has no {{start_offset}}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "c.yaml", minimalConfig+"file:\n  name_template: \""+tc.tmpl+"\"\n")
			code, out, errOut := cli(t, nil, "config", "check", path)
			wantCode(t, code, exitUsage, out, errOut)
			wantContains(t, "stderr", errOut, "file.name_template", tc.want)
		})
	}
}

func TestConfigCheckEnvOverride(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "c.yaml", minimalConfig)
	env := []string{
		"SPILLWAY_KAFKA_BROKERS=10.1.2.3:9093, 10.1.2.4:9093,",
		"SPILLWAY_FILE_MAX_RECORDS=500",
		"SPILLWAY_SHUTDOWN_TIMEOUT=45s",
	}
	code, out, errOut := cli(t, env, "config", "check", path)
	wantCode(t, code, exitOK, out, errOut)
	var got struct {
		Kafka struct{ Brokers []string }
		File  struct {
			MaxRecords int64 `yaml:"max_records"`
		}
		Shutdown struct{ Timeout string }
	}
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not YAML: %v\n%s", err, out)
	}
	if want := []string{"10.1.2.3:9093", "10.1.2.4:9093"}; !slices.Equal(got.Kafka.Brokers, want) {
		t.Errorf("kafka.brokers = %v, want %v (environment over file)\n%s", got.Kafka.Brokers, want, out)
	}
	if got.File.MaxRecords != 500 || got.Shutdown.Timeout != "45s" {
		t.Errorf("file.max_records = %d, shutdown.timeout = %q; want 500, 45s\n%s", got.File.MaxRecords, got.Shutdown.Timeout, out)
	}

	// A bad value from the environment names the variable.
	code, out, errOut = cli(t, []string{"SPILLWAY_FILE_MAX_AGE=soon"}, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "stderr", errOut, "SPILLWAY_FILE_MAX_AGE", "is not a duration")
}

func TestConfigCheckUnknownEnv(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "c.yaml", minimalConfig)
	code, out, errOut := cli(t, []string{"SPILLWAY_KAFKA_BROKRS=h:1"}, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "stderr", errOut, "SPILLWAY_KAFKA_BROKRS: unknown environment variable; did you mean SPILLWAY_KAFKA_BROKERS?")

	// Its value is never shown: it may be a secret.
	code, out, errOut = cli(t, []string{"SPILLWAY_KAFKA_SASL_PASSWRD=topsecret-77"}, "config", "check", path)
	wantCode(t, code, exitUsage, out, errOut)
	wantContains(t, "stderr", errOut, "SPILLWAY_KAFKA_SASL_PASSWRD")
	if strings.Contains(out+errOut, "topsecret-77") {
		t.Errorf("the value of an unknown variable was shown:\n%s", errOut)
	}
}
