package catalog

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/spillway/spillway/internal/keycheck"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "s3cr3t-value"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Redacted hides every credential, and keeps the rest as written.
func TestRedacted(t *testing.T) {
	t.Parallel()
	o := Options{Type: "rest", URI: "https://h/c?token=" + secret, Credential: "id:" + secret, Token: secret,
		Properties: []string{"s3.secret-access-key=" + secret, "s3.access-key-id=AKID", "s3.endpoint=http://h"}}
	r := o.Redacted()
	all := strings.Join([]string{r.URI, r.Credential, r.Token, r.props()["s3.secret-access-key"]}, " ")
	if strings.Contains(all, secret) {
		t.Fatalf("Redacted shows a secret: %s", all)
	}
	if r.props()["s3.access-key-id"] != "AKID" || r.props()["s3.endpoint"] != "http://h" {
		t.Fatalf("Redacted hid what is not secret: %v", r.Properties)
	}
	if o.props()["s3.secret-access-key"] != secret {
		t.Fatal("Redacted changed the options it was called on")
	}
	c := &Catalog{secrets: o.secrets()}
	if err := c.Scrub(errors.New("request with key " + secret + " failed")); strings.Contains(err.Error(), secret) {
		t.Fatalf("scrub left the secret: %v", err)
	}
}

// iceberg.catalog.uri is Glue's endpoint only: iceberg-go hands the Glue
// client's AWS config to the S3 FileIO of every table it loads, and a
// table's files must not go to Glue's host.
func TestGlueEndpointIsGlues(t *testing.T) {
	t.Parallel()
	o := Options{Type: TypeGlue, Region: "eu-west-1", URI: "https://vpce-1.glue.eu-west-1.vpce.amazonaws.com"}
	var ps keycheck.List
	cfg, err := o.awsConfig(testCtx(t), nil, &ps)
	if err != nil || ps.Err() != nil {
		t.Fatalf("awsConfig: %v, %v", err, ps.Err())
	}
	if got := glue.NewFromConfig(cfg).Options().BaseEndpoint; got == nil || *got != o.URI {
		t.Fatalf("Glue's endpoint = %v, want %s", got, o.URI)
	}
	if os.Getenv("AWS_ENDPOINT_URL_S3") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		if got := s3.NewFromConfig(cfg).Options().BaseEndpoint; got != nil {
			t.Fatalf("S3's endpoint = %s, want the region's", *got)
		}
	}
}

// Without a region from the key or the environment, Check names
// iceberg.catalog.region, as `config check` and run print it.
func TestGlueNeedsRegion(t *testing.T) {
	for _, v := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
	err := Options{Type: TypeGlue}.Check(testCtx(t), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "iceberg.catalog.region: is required with iceberg.catalog.type glue") {
		t.Fatalf("Check = %v, want iceberg.catalog.region named", err)
	}
	if err := (Options{Type: TypeGlue, Region: "eu-west-1"}).Check(testCtx(t), t.TempDir()); err != nil {
		t.Fatalf("Check with a region = %v", err)
	}
}
