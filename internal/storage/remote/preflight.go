package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"gocloud.dev/blob"

	"github.com/spillway/spillway/internal/storage/storeerr"
)

// ProbeData is the content of the startup check's probe object, which
// says what it is to whoever finds one left over.
const ProbeData = "spillway preflight: checks that this bucket is writable; safe to delete\n"

// Preflight is what Bucket.Preflight found besides an error.
type Preflight struct {
	// Leftover, when not nil, is why the probe could not be deleted.
	Leftover error
	// CreateOnlyIgnored is set when the store took a second create-only
	// write of the probe.
	CreateOnlyIgnored bool
	// IgnoredBy is the write the store took, for the message; "" is a
	// second write like the first.
	IgnoredBy string
}

// Preflight lists one key under prefix, writes probe create-only, reads it
// back, writes it create-only again (with writeAgain, which goes through
// the writer every data file and ledger entry goes through, and reports
// whether the store took it) and deletes it; on S3 it also completes a
// create-only multipart upload to it. A failed delete is reported as
// rep.Leftover, not err. A *storeerr.FatalError says what to fix.
func (r *Bucket) Preflight(ctx context.Context, prefix, probe string, writeAgain func(context.Context) (accepted bool, err error)) (rep Preflight, err error) {
	// One page of one key: listing must work, but the bucket may hold
	// millions of objects.
	if _, _, err := r.b.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: prefix}); err != nil {
		return rep, r.explain(err, fmt.Sprintf("list objects under %q", prefix))
	}
	err = r.b.WriteAll(ctx, probe, []byte(ProbeData), &blob.WriterOptions{
		ContentType:                 "text/plain",
		DisableContentTypeDetection: true,
		IfNotExist:                  true, // what every real write sends
	})
	if err != nil {
		return rep, r.explain(err, fmt.Sprintf("write %q", probe))
	}
	got, err := r.b.ReadAll(ctx, probe)
	if err == nil && string(got) != ProbeData {
		err = fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(ProbeData))
	}
	if err != nil {
		// Delete anyway: the probe should not outlive a failed check.
		_ = r.b.Delete(ctx, probe)
		return rep, r.explain(err, fmt.Sprintf("read %q", probe))
	}
	rep.CreateOnlyIgnored, err = writeAgain(ctx)
	if err != nil {
		_ = r.b.Delete(ctx, probe)
		return rep, r.explain(err, fmt.Sprintf("write %q a second time, create-only", probe))
	}
	if !rep.CreateOnlyIgnored {
		rep.CreateOnlyIgnored, _, err = s3MultipartTakesTakenName(ctx, r.b, r.name, probe)
		if err != nil {
			_ = r.b.Delete(ctx, probe)
			return rep, r.explain(err, fmt.Sprintf("complete a multipart upload to %q, create-only", probe))
		}
		if rep.CreateOnlyIgnored {
			rep.IgnoredBy = "completed a one-part multipart upload to it the same way (CompleteMultipartUpload)"
		}
	}
	if err := r.b.Delete(ctx, probe); err != nil {
		rep.Leftover = r.explain(err, fmt.Sprintf("delete %q", probe))
	}
	return rep, nil
}

// explain classifies err like wrap, and says which step failed. Missing
// credentials are recognised here only: at startup they are a
// configuration problem, while later the same error can be a passing
// failure to refresh them, which is for retries to handle.
func (r *Bucket) explain(err error, action string) error {
	if f := storeerr.Classify(err, r.name); f != nil {
		if f.Action == "" {
			c := *f
			c.Action = action
			return &c
		}
		return f
	}
	if detail, ok := noAWSCredentials(err); ok {
		return storeerr.NoS3Credentials(r.name, detail, err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return fmt.Errorf("can't %s: host %q does not exist (check the endpoint, or the account name, in storage.url): %w", action, dns.Name, r.wrap(err))
	}
	return fmt.Errorf("can't %s: %w", action, r.wrap(err))
}

// noAWSCredentials recognises the AWS SDK's error when its credential chain
// found nothing (it has no type of its own), and returns the chain's reason.
func noAWSCredentials(err error) (string, bool) {
	const marker = "get identity: get credentials: "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return "", false
	}
	return msg[i+len(marker):], true
}
