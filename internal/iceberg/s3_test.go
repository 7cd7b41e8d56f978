package iceberg

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/spillway/spillway/internal/testkit"
)

// A table whose warehouse is an S3 bucket (versitygw, an S3 nobody here
// wrote), named as Spillway's storage.url names it: s3:// with endpoint
// and region parameters. The catalog's SQLite file is local. Commit, skip
// a duplicate, read back through iceberg-go's S3 FileIO.
func TestS3Warehouse(t *testing.T) {
	t.Parallel()
	endpoint, client, bucket := s3Bucket(t, "spillway-ice-")
	ctx := testCtx(t)

	o := sqlOptions("kafka.events")
	o.Catalog.URI = filepath.Join(t.TempDir(), "catalog.db")
	c := open(t, o, "s3://"+bucket+"/out?endpoint="+endpoint+"&use_path_style=true&region=us-east-1")
	tb := openTable(t, c, "kafka.events")
	loc := tb.Location()
	if want := "s3://" + bucket + "/out/kafka.db/events"; loc != want {
		t.Fatalf("Location = %q, want %q", loc, want)
	}
	// The files are written locally, then stored as Spillway stores them.
	upload := func(f File) File {
		local := t.TempDir()
		lf := dataFile(t, "file://"+local, f.Topic, f.Partition, f.First, f.End, "")
		data, err := os.ReadFile(filepath.Join(local, lf.Location[len("file://"+local)+1:]))
		if err != nil {
			t.Fatal(err)
		}
		key := "out/kafka.db/events/" + lf.Location[len("file://"+local)+1:]
		if _, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		lf.Location = "s3://" + bucket + "/" + key
		return lf
	}
	a := upload(File{Topic: "events", Partition: 0, First: 0, End: 10})
	b2 := upload(File{Topic: "events", Partition: 1, First: 0, End: 20})
	commit(t, tb, a, b2)
	commit(t, tb, a, upload(File{Topic: "events", Partition: 0, First: 10, End: 15}))

	tb2 := openTable(t, open(t, o, "s3://"+bucket+"/out?endpoint="+endpoint+"&region=us-east-1"), "kafka.events")
	next, err := tb2.Next(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 15, 1: 20}; !maps.Equal(next, want) {
		t.Fatalf("Next = %v, want %v", next, want)
	}
	if n := len(dataFiles(t, tb2)); n != 3 {
		t.Fatalf("data files = %d, want 3", n)
	}
	if recs, distinct := scanCount(t, tb2); recs != 35 || distinct != 35 {
		t.Fatalf("scan: %d records, %d distinct; want 35, 35", recs, distinct)
	}
	// The metadata went to the bucket too.
	out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("out/kafka.db/events/metadata/")})
	if err != nil || len(out.Contents) == 0 {
		t.Fatalf("no metadata in the bucket: %v", err)
	}
}

// s3Bucket makes a bucket named prefix and a random suffix in the S3
// emulator scripts/test.sh started, and returns its endpoint and a client
// of it.
func s3Bucket(t *testing.T, prefix string) (endpoint string, client *s3.Client, bucket string) {
	t.Helper()
	endpoint = testkit.NeedEnv(t, "SPILLWAY_TEST_S3_ENDPOINT")
	testkit.NeedEnv(t, "AWS_ACCESS_KEY_ID")
	testkit.NeedEnv(t, "AWS_SECRET_ACCESS_KEY")
	if os.Getenv("AWS_EC2_METADATA_DISABLED") != "true" {
		t.Skip("AWS_EC2_METADATA_DISABLED=true is needed, so that the SDK never probes the metadata address")
	}
	ctx := testCtx(t)
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
	var b [5]byte
	_, _ = rand.Read(b[:])
	bucket = prefix + hex.EncodeToString(b[:])
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return endpoint, client, bucket
}
