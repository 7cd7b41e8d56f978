package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
)

// StorageClassParam is the s3:// URL parameter that sets the storage class
// of the objects Spillway writes, such as STANDARD_IA.
const StorageClassParam = "storage_class"

// CheckStorageClass refuses S3 storage classes whose objects can't be read
// back at once: resuming after a crash reads a partition's last file.
func CheckStorageClass(class string) error {
	switch class {
	case "STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "OUTPOSTS", "EXPRESS_ONEZONE":
		return nil
	case "GLACIER", "DEEP_ARCHIVE":
		return fmt.Errorf("%s=%s: objects in that class can't be read back without a restore, and resuming after a crash reads a partition's last file; write STANDARD or STANDARD_IA and move files later with a lifecycle rule", StorageClassParam, class)
	default:
		return fmt.Errorf("%s=%q is not an S3 storage class; use STANDARD, STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING or GLACIER_IR", StorageClassParam, class)
	}
}

// s3AbortTimeout bounds the AbortMultipartUpload that cleans up a failed or
// aborted upload.
const s3AbortTimeout = 30 * time.Second

// s3StreamingHook returns a blob.WriterOptions.BeforeWrite hook that makes
// an S3 writer stream in parts of partSize, or nil when b is not an S3
// bucket.
//
// gocloud's s3blob writer hands the upload to the AWS transfer manager. It
// sets the manager's PartSizeBytes and Concurrency from BufferSize and
// MaxConcurrency, but leaves MultipartUploadThreshold at 16 MiB: the
// manager first reads up to that threshold into one growing slice, and only
// then cuts it into parts. Below 16 MiB an object is buffered whole and sent
// as one PutObject; above it the 16 MiB slice stays alive until its last
// part is sent, on top of the manager's own (Concurrency+1) part buffers.
//
// The manager's options are not exported, so the hook replaces the client
// gocloud made for this writer (before any goroutine uses it) with one whose
// threshold equals the part size. Objects smaller than one part are still
// sent as one PutObject. A larger one holds its first part (read on its own,
// by io.ReadAll) plus the manager's pool of Concurrency+1 = 2 part buffers,
// allocated up front: 3 parts, 2 once the first part is sent, and briefly 4
// while ReadAll's intermediate chunks are not yet collected. Measured with
// 5 MiB parts on a 64 MiB object (TestEmulatorWriterMemory): 15.5 MiB of
// live heap, sometimes 20.5 MiB, against 34.5 MiB without the hook. These
// are copies of bytes the part queue already holds.
//
// It also sets the objects' storage class, when one is given.
func s3StreamingHook(b *blob.Bucket, partSize int64, storageClass string) func(func(any) bool) error {
	var client *s3.Client
	if !b.As(&client) {
		return nil
	}
	// gocloud passes the URL's request checksum setting to its manager
	// explicitly (the manager ignores the client's); keep it.
	checksum := client.Options().RequestChecksumCalculation
	return func(as func(any) bool) error {
		var in *transfermanager.UploadObjectInput
		if storageClass != "" && as(&in) {
			in.StorageClass = tmtypes.StorageClass(storageClass)
		}
		var tm *transfermanager.Client
		if !as(&tm) {
			return nil
		}
		*tm = *transfermanager.New(client, func(o *transfermanager.Options) {
			o.RequestChecksumCalculation = checksum
			o.PartSizeBytes = partSize
			o.MultipartUploadThreshold = partSize
			o.Concurrency = 1
			// Aborting a writer cancels its context. Without a fresh
			// context for the clean-up, AbortMultipartUpload is sent with
			// the cancelled one, fails, and the parts already sent stay in
			// the bucket as an incomplete upload, billed until a lifecycle
			// rule removes them.
			o.FailTimeout = s3AbortTimeout
		})
		return nil
	}
}

// s3MultipartTakesTakenName completes a one-part multipart upload to key,
// which exists, with If-None-Match: *, and reports whether the store took
// it (then key holds the same bytes again). A store can honour the header on PutObject and ignore it on
// CompleteMultipartUpload (gofakes3 v1.2.0 does): files of a part or more
// would then replace what is under their names, while small writes are
// refused. The last (here the only) part may be smaller than S3's 5 MiB
// minimum, so the check costs three small requests. ok is false when b is
// not an S3 bucket.
func s3MultipartTakesTakenName(ctx context.Context, b *blob.Bucket, bucket, key string) (accepted, ok bool, err error) {
	var c *s3.Client
	if !b.As(&c) {
		return false, false, nil
	}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key,
		ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32})
	if err != nil {
		return false, true, err
	}
	completed := false
	defer func() {
		if completed {
			return
		}
		// An upload refused at completion stays open, billed until a
		// lifecycle rule removes it.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s3AbortTimeout)
		defer cancel()
		_, _ = c.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId})
	}()
	part, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader(ProbeData), ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32})
	if err != nil {
		return false, true, err
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		IfNoneMatch: aws.String("*"),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: []s3types.CompletedPart{
			{ETag: part.ETag, PartNumber: aws.Int32(1), ChecksumCRC32: part.ChecksumCRC32},
		}}})
	var re *awshttp.ResponseError
	if errors.As(err, &re) && (re.HTTPStatusCode() == http.StatusPreconditionFailed || re.HTTPStatusCode() == http.StatusConflict) {
		return false, true, nil
	}
	if err != nil {
		return false, true, err
	}
	completed = true
	return true, true, nil
}
