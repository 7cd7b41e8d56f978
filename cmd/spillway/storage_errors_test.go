package main

// Fatal storage errors seen from the outside: `spillway run` against each
// emulator with a missing bucket or wrong credentials must exit 1 at
// startup with a message that says what to fix, before it consumes or
// commits anything, and without printing a secret. A part size the store
// can't take is a config error: exit 2, naming storage.part_size.
//
// The emulators are the ones scripts/test.sh starts; without them these
// tests skip, unless SPILLWAY_TEST_REQUIRE_TOOLS=1.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kadm"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // registers s3://

	"github.com/spillway/spillway/internal/testkit"
)

// needEmulator returns the variable that says where an emulator listens, or
// skips (fails under SPILLWAY_TEST_REQUIRE_TOOLS=1), as the storage
// package's emulator tests do.
func needEmulator(t *testing.T, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	if os.Getenv("SPILLWAY_TEST_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s is not set but SPILLWAY_TEST_REQUIRE_TOOLS=1: scripts/test.sh should have started the emulator and exported it", name)
	}
	t.Skipf("%s is not set: run scripts/test.sh, which installs and starts the emulator", name)
	return ""
}

func randomName(t *testing.T, prefix string) string {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// runToExit runs the binary with env added to childEnv and waits for it to
// exit on its own: a fatal startup error must not need a signal.
func runToExit(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runToExitEnv(t, childEnv(env...), args...)
}

// runToExitEnv is runToExit with the child's whole environment given.
func runToExitEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncBuffer
	cmd := exec.Command(spillwayBinary(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(waitDeadline):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("spillway %s did not exit within %v\nstderr:\n%s", strings.Join(args, " "), waitDeadline, errb.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// storageCase is one fatal misconfiguration of one backend.
type storageCase struct {
	name string
	url  string
	env  []string // added to the child's environment
	// want is in stderr; secrets must not be in stdout or stderr.
	want    []string
	secrets []string
}

func TestBinaryRunStorageFatal(t *testing.T) {
	spillwayBinary(t)
	testkit.WaitIdleConns(t)
	backends := []struct {
		name  string
		cases func(t *testing.T) []storageCase
	}{
		{"s3", s3Cases},
		{"gcs", gcsCases},
		{"azure", azureCases},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, tc := range be.cases(t) {
				t.Run(tc.name, func(t *testing.T) { runStorageCase(t, tc) })
			}
		})
	}
}

// runStorageCase runs spillway against a topic holding records, and checks
// that it exits 1 with the message, consumed nothing and committed nothing.
func runStorageCase(t *testing.T, tc storageCase) {
	cluster := testkit.NewCluster(t, partitions, testTopic)
	cl := cluster.Client(t)
	produceBatch(t, cl, 0, 400)
	group := randomName(t, "fatal-")
	brokers := fmt.Sprintf("[%q]", cluster.Addrs()[0])
	cfg := writeFile(t, "spillway.yaml", fmt.Sprintf(`kafka:
  brokers: %s
  topics: [events]
  group: %s
storage:
  url: '%s'
  prefix: raw/
admin:
  listen: ""
`, brokers, group, tc.url))
	code, stdout, stderr := runToExit(t, tc.env, "run", "--config", cfg)
	t.Logf("exit %d; stderr:\n%s", code, stderr)
	if code != exitRuntime {
		t.Errorf("exit code %d, want %d", code, exitRuntime)
	}
	wantContains(t, "stderr", stderr, tc.want...)
	for _, s := range tc.secrets {
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("output shows the secret %q", s)
		}
	}
	// The preflight runs before the consumer exists: it never started.
	if strings.Contains(stderr, "spillway running") {
		t.Error("the pipeline started despite the storage error")
	}
	if c := testkit.CommittedOffsets(t, cl, group, testTopic); len(c) != 0 {
		t.Errorf("offsets committed: %v", c)
	}
	// Nothing consumed: the group was never joined, so the broker does
	// not know it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if _, ok := groups[group]; ok {
		t.Errorf("consumer group %s exists: spillway joined it", group)
	}
}

func s3Cases(t *testing.T) []storageCase {
	endpoint := needEmulator(t, "SPILLWAY_TEST_S3_ENDPOINT")
	key := needEmulator(t, "AWS_ACCESS_KEY_ID")
	secret := needEmulator(t, "AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	s3url := func(bucket string) string {
		return "s3://" + bucket + "?endpoint=" + endpoint + "&use_path_style=true&region=us-east-1"
	}
	missing := randomName(t, "spillway-missing-")
	existing := createS3Bucket(t, endpoint)
	badSecret := randomName(t, "wrong-secret-do-not-print-")
	return []storageCase{
		{
			name: "missing-bucket", url: s3url(missing),
			want:    []string{`storage: bucket "` + missing + `" does not exist (Spillway never creates buckets: create it, or fix storage.url): NoSuchBucket`},
			secrets: []string{secret},
		},
		{
			name: "wrong-secret", url: s3url(existing),
			env:     []string{"AWS_SECRET_ACCESS_KEY=" + badSecret},
			want:    []string{`storage: the credentials were refused by bucket "` + existing + `" (check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role)`, "SignatureDoesNotMatch"},
			secrets: []string{badSecret, secret},
		},
		{
			name: "wrong-region", url: strings.Replace(s3url(existing), "region=us-east-1", "region=eu-west-1", 1),
			want:    []string{`storage: bucket "` + existing + `" is in region us-east-1, not the one configured (set region=us-east-1 in storage.url): AuthorizationHeaderMalformed`},
			secrets: []string{secret},
		},
		{
			// Nothing in the environment, no profile, no instance role
			// (AWS_EC2_METADATA_DISABLED): the SDK finds no credentials.
			name: "no-credentials", url: s3url(existing),
			env: []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
				"AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_CONFIG_FILE=/nonexistent"},
			want:    []string{`storage: no usable credentials were found for bucket "` + existing + `" (check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the role)`},
			secrets: []string{secret},
		},
		{
			// versitygw answers an unknown key with XAdminUserNotFound,
			// AWS with InvalidAccessKeyId.
			name: "wrong-key", url: s3url(existing),
			env:     []string{"AWS_ACCESS_KEY_ID=" + key + "-wrong"},
			want:    []string{`storage: the credentials were refused by bucket "` + existing + `"`, "XAdminUserNotFound"},
			secrets: []string{secret},
		},
	}
}

// createS3Bucket makes a bucket on versitygw, so the wrong-credentials
// cases fail on the credentials, not the bucket. gocloud never creates
// buckets: the SDK client under it does.
func createS3Bucket(t *testing.T, endpoint string) string {
	t.Helper()
	name := randomName(t, "spillway-fatal-")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := blob.OpenBucket(ctx, "s3://"+name+"?endpoint="+endpoint+"&use_path_style=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("not an s3 bucket")
	}
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

func gcsCases(t *testing.T) []storageCase {
	needEmulator(t, "STORAGE_EMULATOR_HOST")
	missing := randomName(t, "spillway-missing-")
	// fake-gcs-server has no authentication: it accepts any credentials,
	// so there is no wrong-credentials case for GCS (the classification of
	// GCS's 401 and 403 is unit-tested in package storage).
	return []storageCase{{
		name: "missing-bucket", url: "gs://" + missing,
		want: []string{`storage: bucket "` + missing + `" does not exist (Spillway never creates buckets: create it, or fix storage.url)`},
	}}
}

func azureCases(t *testing.T) []storageCase {
	conn := needEmulator(t, "SPILLWAY_TEST_AZURE_CONNECTION_STRING")
	accountKey := testkit.AzureConnField(conn, "AccountKey")
	if accountKey == "" {
		t.Fatalf("SPILLWAY_TEST_AZURE_CONNECTION_STRING has no AccountKey")
	}
	env := func(conn string) []string {
		return []string{"AZURE_STORAGE_CONNECTION_STRING=" + conn}
	}
	missing := randomName(t, "spillway-missing-")
	existing := randomName(t, "spillway-fatal-")
	cc, err := container.NewClientFromConnectionString(conn, existing, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cc.Create(ctx, nil); err != nil {
		t.Fatalf("create container %s: %v", existing, err)
	}
	// A key of the right form (base64, as long) that is not the account's.
	var raw [64]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	badKey := base64.StdEncoding.EncodeToString(raw[:])
	badConn := strings.Replace(conn, "AccountKey="+accountKey, "AccountKey="+badKey, 1)
	return []storageCase{
		{
			name: "missing-container", url: "azblob://" + missing, env: env(conn),
			want:    []string{`storage: container "` + missing + `" does not exist (Spillway never creates containers: create it, or fix storage.url): ContainerNotFound`},
			secrets: []string{accountKey},
		},
		{
			// Azurite answers a wrong key with AuthorizationFailure, Azure
			// with AuthenticationFailed.
			name: "wrong-key", url: "azblob://" + existing, env: env(badConn),
			want:    []string{`storage: the credentials were refused by container "` + existing + `" (check AZURE_STORAGE_CONNECTION_STRING`, "AuthorizationFailure"},
			secrets: []string{badKey, accountKey},
		},
		{
			// A setting Spillway can't use at all is named.
			name: "unusable-connection-string", url: "azblob://" + existing,
			env:     env(strings.Replace(conn, "AccountKey="+accountKey, "AccountKey=not base64!"+accountKey, 1)),
			want:    []string{`storage: open azblob://` + existing + `: AZURE_STORAGE_CONNECTION_STRING: decode account key: illegal base64 data`},
			secrets: []string{accountKey},
		},
	}
}

// TestBinaryPartSizeTooSmall: a part size S3 can't take is refused by
// `config check` and by `run`, with exit 2 and the key named, before
// anything connects anywhere.
func TestBinaryPartSizeTooSmall(t *testing.T) {
	spillwayBinary(t)
	for _, tc := range []struct {
		name, storage, file string
		want                []string
	}{
		{"s3 minimum", "  url: 's3://b?region=us-east-1'\n  part_size: 1MiB\n", "",
			[]string{`storage.part_size: "1MiB" is too small for s3: S3 parts must be at least 5MiB`}},
		{"s3 parts per object", "  url: 's3://b?region=us-east-1'\n  part_size: 5MiB\n", "file:\n  max_bytes: 100GiB\n",
			[]string{`storage.part_size: "5MiB" is too small for file.max_bytes 100GiB`, "use at least 11MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, "spillway.yaml", "kafka:\n  brokers: [\"127.0.0.1:1\"]\n  topics: [events]\nstorage:\n"+tc.storage+tc.file)
			for _, args := range [][]string{{"config", "check", cfg}, {"run", "--config", cfg}} {
				code, stdout, stderr := runToExit(t, nil, args...)
				if code != exitUsage {
					t.Errorf("%s: exit code %d, want %d\nstderr:\n%s", args[0], code, exitUsage, stderr)
				}
				wantContains(t, args[0]+" stderr", stderr, tc.want...)
				if stdout != "" {
					t.Errorf("%s: stdout should be empty, got:\n%s", args[0], stdout)
				}
			}
		})
	}
}

// TestBinaryRunEndpointCredentialsHidden: credentials in the S3 endpoint=
// parameter never show in what `spillway run` prints, whichever part of
// it fails: the store is unreachable (a closed port), so the startup check
// fails, with the endpoint's host to fix. They used to be printed whole.
func TestBinaryRunEndpointCredentialsHidden(t *testing.T) {
	spillwayBinary(t)
	cluster := testkit.NewCluster(t, partitions, testTopic)
	const user, secret = "endpoint-user-7f3a", "endpoint-secret-91c2"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := writeFile(t, "spillway.yaml", fmt.Sprintf(`kafka:
  brokers: [%q]
  topics: [events]
storage:
  url: 's3://bucket?endpoint=http://%s:%s@%s&use_path_style=true&region=us-east-1'
  max_retries: 0
admin:
  listen: ""
`, cluster.Addrs()[0], user, secret, closed))
	code, stdout, stderr := runToExit(t, []string{"AWS_ACCESS_KEY_ID=key-id", "AWS_SECRET_ACCESS_KEY=key-secret"}, "run", "--config", cfg)
	t.Logf("exit %d; stderr:\n%s", code, stderr)
	if code != exitRuntime {
		t.Errorf("exit code %d, want %d", code, exitRuntime)
	}
	for _, s := range []string{user, secret} {
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("output shows %q of the endpoint's credentials", s)
		}
	}
	wantContains(t, "stderr", stderr, closed)
}
