package iceberg

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/spillway/spillway/internal/testkit/gluefake"
)

// The Glue tests run against gluefake, a stand-in for AWS Glue (its doc
// says why no real one can run here), through iceberg-go's Glue client
// and its AWS SDK: the wire protocol, SigV4 scope and Glue's optimistic
// lock are real on the client's side.

const (
	glueRegion = "eu-west-1"
	glueKeyID  = "AKIDSPILLWAYGLUE"
	glueSecret = "glue-s3cr3t-access-key"
)

// glueOptions are the options of a Glue catalog served by a new stand-in,
// with static credentials (iceberg-go's glue.* properties), so that
// parallel tests need no environment.
func glueOptions(t *testing.T, table string) (Options, *gluefake.Server) {
	t.Helper()
	srv := gluefake.Start(t, glueRegion, glueKeyID)
	o := Defaults()
	o.Table = table
	o.Catalog.Type, o.Catalog.Region, o.Catalog.URI = TypeGlue, glueRegion, srv.URL
	o.Catalog.Properties = []string{"glue.access-key-id=" + glueKeyID, "glue.secret-access-key=" + glueSecret}
	return o, srv
}

// A table created and committed on a Glue catalog, its files in a local
// warehouse: Glue's table points at the metadata file Spillway's commit
// wrote, and a second catalog reads the same records back. The table is
// in the catalog id the options name, not in the credentials' account.
func TestGlueCatalog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o, srv := glueOptions(t, "kafka.events")
	o.Catalog.CatalogID = "123456789012"
	tb := openTable(t, open(t, o, dir), "kafka.events")
	loc := tb.Location()
	if want := "file://" + dir + "/kafka.db/events"; loc != want {
		t.Fatalf("Location = %q, want %q", loc, want)
	}
	commit(t, tb, dataFile(t, loc, "events", 0, 0, 10, ""), dataFile(t, loc, "events", 1, 0, 5, ""))
	commit(t, tb, dataFile(t, loc, "events", 0, 10, 25, ""))

	params, version := srv.TableParameters("123456789012", "kafka", "events")
	if params["table_type"] != "ICEBERG" || !strings.HasPrefix(params["metadata_location"], loc+"/metadata/") || version == "0" {
		t.Fatalf("Glue table: parameters %v, version %s; want an ICEBERG table at a metadata file under %s, updated", params, version, loc)
	}
	if _, err := os.Stat(strings.TrimPrefix(params["metadata_location"], "file://")); err != nil {
		t.Fatalf("the metadata file Glue points at: %v", err)
	}
	if p, _ := srv.TableParameters(gluefake.DefaultAccount, "kafka", "events"); p != nil {
		t.Fatal("the table is in the credentials' own account, not in iceberg.catalog.catalog_id's")
	}

	tb2 := openTable(t, open(t, o, dir), "kafka.events")
	next, err := tb2.Next(testCtx(t), "events")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 25, 1: 5}; !maps.Equal(next, want) {
		t.Fatalf("Next = %v, want %v", next, want)
	}
	if recs, distinct := scanCount(t, tb2); recs != 30 || distinct != 30 {
		t.Fatalf("scan: %d records, %d distinct; want 30, 30", recs, distinct)
	}
}

// Each catalog fences a zombie the same way: two instances of one group
// commit to one table, the second (a zombie, or a slow owner) loses the
// race deterministically: the first commits the range they share, and
// more, after the second has planned (on Glue, later still: after
// iceberg-go's Glue client has read the table for its UpdateTable, so
// that only Glue's lock on the VersionId it read stands between them).
// The catalog refuses the second's commit (sql: the row's metadata
// location changed; rest: 409; glue: ConcurrentModificationException);
// it reloads, skips its copy of the shared range and adds only its own
// file.
func TestCatalogsFenceZombie(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{TypeSQL, TypeREST, TypeGlue} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wh := filepath.Join(dir, "wh")
			o := sqlOptions("kafka.events")
			var glue *gluefake.Server
			switch kind {
			case TypeREST:
				o.Catalog.Type, o.Catalog.URI, o.Catalog.Token = TypeREST, restStandIn(t, dir, "rest-token-value"), "rest-token-value"
			case TypeGlue:
				o, glue = glueOptions(t, "kafka.events")
			}
			ca, cb := open(t, o, wh), open(t, o, wh)
			ta, tb := openTable(t, ca, "kafka.events"), openTable(t, cb, "kafka.events")
			loc := ta.Location()
			f0 := dataFile(t, loc, "events", 0, 0, 10, "")
			commit(t, ta, f0) // the table exists from here on

			shared := dataFile(t, loc, "events", 1, 0, 10, "")
			sharedZombie := dataFile(t, loc, "events", 1, 0, 10, "-zombie")
			own := dataFile(t, loc, "events", 2, 0, 7, "")
			other := dataFile(t, loc, "events", 0, 10, 20, "")
			attempts := 0
			tb.beforeCommit = func() {
				attempts++
				if attempts == 1 && glue == nil {
					commit(t, ta, shared, other)
				}
			}
			if glue != nil {
				glue.BeforeNextUpdate(func() { commit(t, ta, shared, other) })
			}
			commit(t, tb, sharedZombie, own)
			if attempts < 2 {
				t.Fatalf("attempts = %d: the commit never conflicted, the test proves nothing", attempts)
			}
			if glue != nil && glue.Conflicts() == 0 {
				t.Fatal("Glue never refused a stale VersionId")
			}
			fenced(t, dataFiles(t, ta), tb, f0, other, shared, own)
		})
	}
}

// Two instances race on a Glue table neither has created, each with its
// copy of every range, in several commits: both land, and no range is in
// twice.
func TestGlueConcurrentInstances(t *testing.T) {
	t.Parallel()
	o, _ := glueOptions(t, "kafka.events")
	concurrentInstances(t, o, 3, 4)
}

// What Glue refuses is said with the key to fix, and without the secret:
// credentials Glue does not know, a region that is not the catalog's, a
// database that does not exist when Spillway may not create it.
func TestGlueErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"wrong credentials", func(o *Options) {
			o.Catalog.Properties = []string{"glue.access-key-id=AKIDSOMEONEELSE", "glue.secret-access-key=" + glueSecret}
		}, "refused the AWS credentials; give valid ones in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the instance's role"},
		{"wrong region", func(o *Options) { o.Catalog.Region = "us-east-1" },
			"iceberg.catalog.region us-east-1 is not the region of"},
		{"no such database", func(o *Options) { o.AutoCreate = false },
			"namespace kafka of table kafka.events does not exist and iceberg.auto_create is false; create the namespace and the table, or set iceberg.auto_create: true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, _ := glueOptions(t, "kafka.events")
			tt.set(&o)
			_, err := open(t, o, dir).Table(testCtx(t), "kafka.events")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Table = %v, want an error with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), glueSecret) {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

// A Glue table whose warehouse is an S3 bucket (versitygw), with the
// credentials of the environment for both Glue and S3, as in production:
// the S3 FileIO that iceberg-go gives Glue's AWS config must still reach
// the bucket's endpoint, not Glue's.
func TestGlueS3Warehouse(t *testing.T) {
	t.Parallel()
	endpoint, client, bucket := s3Bucket(t, "spillway-glue-")
	keyID := os.Getenv("AWS_ACCESS_KEY_ID")
	srv := gluefake.Start(t, "us-east-1", keyID)
	o := Defaults()
	o.Table = "kafka.events"
	o.Catalog.Type, o.Catalog.Region, o.Catalog.URI = TypeGlue, "us-east-1", srv.URL
	wh := "s3://" + bucket + "/out?endpoint=" + endpoint + "&region=us-east-1"
	tb := openTable(t, open(t, o, wh), "kafka.events")
	upload := func(part int32, first, end int64) File {
		local := t.TempDir()
		lf := dataFile(t, "file://"+local, "events", part, first, end, "")
		rel := lf.Location[len("file://"+local)+1:]
		data, err := os.ReadFile(filepath.Join(local, rel))
		if err != nil {
			t.Fatal(err)
		}
		key := "out/kafka.db/events/" + rel
		if _, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		lf.Location = "s3://" + bucket + "/" + key
		return lf
	}
	commit(t, tb, upload(0, 0, 10), upload(1, 0, 20))
	tb2 := openTable(t, open(t, o, wh), "kafka.events")
	if recs, distinct := scanCount(t, tb2); recs != 30 || distinct != 30 {
		t.Fatalf("scan: %d records, %d distinct; want 30, 30", recs, distinct)
	}
	params, _ := srv.TableParameters("", "kafka", "events")
	if !strings.HasPrefix(params["metadata_location"], "s3://"+bucket+"/out/kafka.db/events/metadata/") {
		t.Fatalf("Glue's metadata_location = %q, want one in the bucket", params["metadata_location"])
	}
}
