package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strings"

	"github.com/apache/iceberg-go"
	iceglue "github.com/apache/iceberg-go/catalog/glue"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/smithy-go"

	"github.com/spillway/spillway/internal/keycheck"
)

// AWS Glue. iceberg-go's Glue catalog keeps each table's current metadata
// location in the Glue table's parameters and commits with Glue's
// optimistic lock (UpdateTable with the VersionId it read), which a
// concurrent commit fails with ConcurrentModificationException: iceberg-go
// reports that as table.ErrCommitFailed, which package iceberg reloads
// and retries like any catalog's conflict.
//
// Credentials come from the AWS default chain, as storage's s3:// does
// (environment, shared config and profile, web identity, the instance's
// role), or from the glue.access-key-id and glue.secret-access-key
// properties, iceberg-go's names. They are never shown: Validate and
// Redacted treat those properties as secret, and Scrub removes them from
// errors.

// glueInfo is what Scrub says about a Glue catalog's errors.
type glueInfo struct {
	region, endpoint, catalogID string
}

// awsConfig is the AWS config the Glue client signs with. A problem the
// user can fix without the network (no region, a profile that does not
// exist) is added to ps.
func (o Options) awsConfig(ctx context.Context, props iceberg.Properties, ps *keycheck.List) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, awsconfig.WithRegion(o.Region))
	}
	key, secret, token := props[iceglue.AccessKeyID], props[iceglue.SecretAccessKey], props[iceglue.SessionToken]
	switch {
	case key != "" && secret != "":
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(key, secret, token)))
	case key != "" || secret != "":
		ps.Add("iceberg.catalog.properties", "", "sets one of %s and %s; set both, or neither to take the AWS credentials of the environment", iceglue.AccessKeyID, iceglue.SecretAccessKey)
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		// A profile that does not exist, a config file that does not
		// parse: what the environment says, not a key of ours.
		ps.Add("AWS_PROFILE", os.Getenv("AWS_PROFILE"), "can't give the glue catalog an AWS config: %v; fix the profile (AWS_PROFILE, AWS_CONFIG_FILE) or unset it", err)
		return aws.Config{}, ps.Err()
	}
	if cfg.Region == "" {
		ps.Add("iceberg.catalog.region", "", "is required with iceberg.catalog.type glue: the AWS environment names no region (AWS_REGION, the profile's region); give the Glue catalog's region, such as us-east-1")
	}
	if o.URI != "" {
		// The endpoint is Glue's only: the catalog hands the same config
		// to the S3 FileIO that reads and writes the table's files, which
		// a BaseEndpoint would send to Glue's host too. A config source
		// that names Glue's endpoint by its service id is what the SDK
		// reads for AWS_ENDPOINT_URL_GLUE, and S3 does not ask it.
		if _, all := os.LookupEnv("AWS_ENDPOINT_URL"); all {
			if _, g := os.LookupEnv("AWS_ENDPOINT_URL_GLUE"); !g {
				ps.Add("iceberg.catalog.uri", redactURI(o.URI), "is overridden by AWS_ENDPOINT_URL, which the AWS SDK applies to every service that has no endpoint of its own; set AWS_ENDPOINT_URL_GLUE to the same URL, or unset AWS_ENDPOINT_URL")
			}
		}
		cfg.ConfigSources = append([]any{glueEndpoint(o.URI)}, cfg.ConfigSources...)
	}
	return cfg, nil
}

// glueEndpoint is an endpoint for the Glue service only, as a config
// source of the AWS SDK (the shape its shared config's services section
// has).
type glueEndpoint string

// GetServiceBaseEndpoint is the SDK's ServiceBaseEndpointProvider.
func (e glueEndpoint) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	if sdkID == glue.ServiceID {
		return string(e), true, nil
	}
	return "", false, nil
}

// openGlue opens iceberg-go's Glue catalog over r's AWS config.
func (c *Catalog) openGlue(o Options, r resolved) error {
	props := iceglue.AwsProperties(maps.Clone(r.props))
	if o.CatalogID != "" {
		props[iceglue.CatalogIdKey] = o.CatalogID
	}
	cat, err := iceglue.NewCatalog(iceglue.WithAwsConfig(r.aws), iceglue.WithAwsProperties(props))
	if err != nil {
		return fmt.Errorf("iceberg: glue catalog: %w", c.Scrub(err))
	}
	c.Catalog = cat
	c.glue = &glueInfo{region: r.aws.Region, endpoint: o.URI, catalogID: o.CatalogID}
	return nil
}

// where says which Glue catalog a message is about.
func (g *glueInfo) where() string {
	s := "the Glue catalog in region " + g.region
	if g.catalogID != "" {
		s += " with iceberg.catalog.catalog_id " + g.catalogID
	}
	if g.endpoint != "" {
		s += " at " + redactURI(g.endpoint)
	}
	return s
}

// explain adds to a Glue error what to fix, when Glue (or reaching it)
// says: the credentials, the region, or a database that does not exist.
// The original stays wrapped.
func (g *glueInfo) explain(err error) error {
	var api smithy.APIError
	var dns *net.DNSError
	switch {
	case errors.As(err, &api):
		switch code := api.ErrorCode(); code {
		case "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredTokenException", "IncompleteSignatureException", "SignatureDoesNotMatch":
			return fmt.Errorf("%w (%s refused the AWS credentials; give valid ones in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the instance's role)", err, g.where())
		case "InvalidSignatureException":
			if strings.Contains(strings.ToLower(api.ErrorMessage()), "region") {
				return fmt.Errorf("%w (iceberg.catalog.region %s is not the region of %s; give the catalog's region)", err, g.region, redactURI(g.endpoint))
			}
			return fmt.Errorf("%w (%s refused the AWS credentials' signature; check AWS_SECRET_ACCESS_KEY, or the profile's)", err, g.where())
		case "AccessDeniedException":
			return fmt.Errorf("%w (the AWS credentials may not use %s; grant them glue:GetDatabase, glue:CreateDatabase, glue:GetTable, glue:CreateTable and glue:UpdateTable, or set iceberg.catalog.catalog_id to the account that owns the catalog)", err, g.where())
		case "EntityNotFoundException":
			if strings.Contains(api.ErrorMessage(), "Database") {
				return fmt.Errorf("%w (the database is not in %s; create it, set iceberg.auto_create: true, or check iceberg.catalog.region and iceberg.catalog.catalog_id)", err, g.where())
			}
		}
	case errors.As(err, &dns):
		return fmt.Errorf("%w (no Glue endpoint answers at %s: check iceberg.catalog.region %q, or iceberg.catalog.uri)", err, dns.Name, g.region)
	case strings.Contains(err.Error(), "failed to retrieve credentials"), strings.Contains(err.Error(), "failed to refresh cached credentials"):
		return fmt.Errorf("%w (no AWS credentials for %s; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run with an instance role)", err, g.where())
	}
	return err
}
